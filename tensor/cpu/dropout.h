// CPU dropout: draws the keep mask from the Philox stream and scales the kept elements.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace accel::cpu {

// out (x's dtype) and keep_mask (bool) are contiguous like x; element i is kept when
// dropout_keep(seed, offset, i, p) and then multiplied by scale.
void dropout(const Tensor& out, const Tensor& keep_mask, const Tensor& x, float p, double scale, uint64_t seed,
             uint64_t offset);

}  // namespace accel::cpu
