// gradcheck: compares backward's grads with central finite differences in f64.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace accel {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-6;
  double rtol = 1e-4;
  uint64_t seed = 0;   // for the random projection of the output
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input and element, analytic vs numeric
};

// f maps the inputs to one tensor. Inputs must be f64; those that require grad are checked.
// The scalar checked is sum(f(inputs) * w) for a fixed random w, so every output element counts.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions options = {});

}  // namespace accel
