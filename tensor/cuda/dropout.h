// CUDA twin of tensor/cpu/dropout.h: the same keep mask as the CPU for the same (seed, offset).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace accel::cuda {

void dropout(const Tensor& out, const Tensor& keep_mask, const Tensor& x, float p, double scale, uint64_t seed,
             uint64_t offset);

}  // namespace accel::cuda
