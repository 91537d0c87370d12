// nn::Linear: y = x W^T + b over the last dim, with PyTorch's default initialisation.
#pragma once

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

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [..., in] -> [..., out]

 private:
  int64_t in_features_, out_features_;
  Tensor weight_, bias_;
};

}  // namespace accel::nn
