// nn::Linear: parameters, init and forward through the differentiable linear op.
#include "nn/linear.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/creation.h"

namespace accel::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features <= 0 || out_features <= 0)
    throw Error(fmt::format("Linear: features must be positive, got in {} out {}", in_features, out_features));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight_ = register_parameter("weight", empty({out_features, in_features}));
  init::uniform_(weight_, -bound, bound, gen);
  if (bias) {
    bias_ = register_parameter("bias", empty({out_features}));
    init::uniform_(bias_, -bound, bound, gen);
  }
}

Tensor Linear::forward_impl(const Tensor& x) {
  return forward_ ? forward_(x, weight_, bias_) : accel::linear(x, weight_, bias_);
}

}  // namespace accel::nn
