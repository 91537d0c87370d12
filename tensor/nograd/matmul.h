// Raw matrix product: [..., M, K] x [..., K, N] with broadcast batch dims; 1-d operands act as
// vectors as in numpy. Transposed views are read in place, without a copy. f32 accumulation.
#pragma once

#include "tensor/tensor.h"

namespace accel::nograd {

Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace accel::nograd
