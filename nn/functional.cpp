// Stateless building blocks: linear and the causal mask.
#include "nn/functional.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "tensor/creation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/views.h"

namespace accel::nn::functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return accel::linear(x, weight, bias); }

Tensor causal_mask(int64_t T, Device device) {
  const Tensor positions = arange(T, DType::i64, device);
  return ops::gt(ops::view(positions, {1, T}), ops::view(positions, {T, 1}));
}

}  // namespace accel::nn::functional
