// Stateless building blocks the modules are made of, for users who keep their own weights.
#pragma once

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace accel::nn::functional {

// x [..., in] times weight [out, in] transposed, plus bias [out] when defined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// A bool [T, T] mask, true above the diagonal: the future positions query i must not see.
Tensor causal_mask(int64_t T, Device device = Device::cpu());

}  // namespace accel::nn::functional
