// nn::functional: the causal mask.
#include "nn/functional.h"

#include <fmt/format.h>

#include "tensor/creation.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel::nn::functional {

Tensor causal_mask(int64_t T, Device device) {
  const Tensor positions = arange(T, DType::i64, device);
  return nograd::gt(nograd::view(positions, {1, T}), nograd::view(positions, {T, 1}));
}

}  // namespace accel::nn::functional
