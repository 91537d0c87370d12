// nn::LayerNorm: parameters and the call into the fused layer_norm op.
#include "nn/layer_norm.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "tensor/creation.h"

namespace accel::nn {

LayerNorm::LayerNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  if (dim <= 0) throw Error(fmt::format("LayerNorm: dim must be positive, got {}", dim));
  if (!(eps > 0)) throw Error(fmt::format("LayerNorm: eps must be positive, got {}", eps));
  weight_ = register_parameter("weight", ones({dim}));
  bias_ = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward_impl(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != dim_)
    throw Error(fmt::format("LayerNorm: input {} does not end in dim {}", shape_str(x.shape()), dim_));
  return layer_norm(x, weight_, bias_, eps_);
}

}  // namespace accel::nn
