// CPU copy with broadcasting and dtype conversion.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// dst and src are on the CPU; src already checked to broadcast to dst's shape.
void copy(const Tensor& dst, const Tensor& src);

}  // namespace accel::cpu
