// nn::functional: the stateless pieces of the modules that are not ops of their own.
#pragma once

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace accel::nn::functional {

// A bool [T, T] mask, true above the diagonal: the future positions query i must not see.
Tensor causal_mask(int64_t T, Device device = Device::cpu());

}  // namespace accel::nn::functional
