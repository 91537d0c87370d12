// Raw fully-connected layer: out = x @ weight^T + bias in one GEMM whose output starts as the
// broadcast bias, so the bias costs no separate pass. Not recorded by autograd (see accel::linear).
#pragma once

#include "tensor/tensor.h"

namespace accel::nograd {

// x [..., in], weight [out, in], bias [out] or undefined; returns [..., out] in x's dtype.
// All three share dtype (floating) and device. Halves compute in f32 and round once.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace accel::nograd
