// nn::Linear: y = x W^T + b over the last dim, with PyTorch's default initialisation.
#pragma once

#include <functional>

#include "nn/module.h"
#include "tensor/generator.h"

namespace accel::nn {

class Linear : public Module {
 public:
  // weight [out, in] and bias [out] are drawn from U(-1/sqrt(in), 1/sqrt(in)), as PyTorch's
  // kaiming_uniform(a = sqrt(5)) default works out to.
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);

  std::string type_name() const override { return "Linear"; }

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

  // What forward computes from (x, weight, bias) in place of accel::linear: a recipe above nn (FP8's
  // scaled Linear) swaps the product without nn knowing it. An empty function restores accel::linear.
  using ForwardFn = std::function<Tensor(const Tensor& x, const Tensor& weight, const Tensor& bias)>;
  void set_forward(ForwardFn forward) { forward_ = std::move(forward); }
  bool has_custom_forward() const { return static_cast<bool>(forward_); }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [..., in] -> [..., out]

 private:
  int64_t in_features_, out_features_;
  Tensor weight_, bias_;
  ForwardFn forward_;
};

}  // namespace accel::nn
