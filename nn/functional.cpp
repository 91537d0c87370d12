// Stateless building blocks: linear and the causal mask.
#include "nn/functional.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "tensor/creation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/views.h"

namespace accel::nn::functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2)
    throw Error(fmt::format("linear: weight must be [out, in], got {}", shape_str(weight.shape())));
  if (x.dim() < 1 || x.size(-1) != weight.size(1))
    throw Error(fmt::format("linear: input {} does not end in in_features {} of weight {}", shape_str(x.shape()),
                            weight.size(1), shape_str(weight.shape())));
  if (bias.defined() && bias.shape() != Shape{weight.size(0)})
    throw Error(fmt::format("linear: bias {} does not match out_features {}", shape_str(bias.shape()),
                            weight.size(0)));
  // matmul reads the transposed weight in place.
  Tensor out = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? add(out, bias) : out;
}

Tensor causal_mask(int64_t T, Device device) {
  const Tensor positions = arange(T, DType::i64, device);
  return ops::gt(ops::view(positions, {1, T}), ops::view(positions, {T, 1}));
}

}  // namespace accel::nn::functional
