// nn::LayerNorm: normalises the last dim to zero mean and unit variance, then scales and shifts.
#pragma once

#include "nn/module.h"

namespace accel::nn {

class LayerNorm : public Module {
 public:
  // weight starts at ones and bias at zeros, both [dim].
  explicit LayerNorm(int64_t dim, double eps = 1e-5);

  std::string type_name() const override { return "LayerNorm"; }

  double eps() const { return eps_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [..., dim] -> [..., dim]

 private:
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace accel::nn
