// CPU layer norm over the last dim of a contiguous [rows, dim] tensor, and its backward pass.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// weight and bias are contiguous [dim] or undefined; mean and rstd are [rows] of the stats dtype
// (f64 for f64 x, else f32).
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps);
// grad_weight / grad_bias ([dim]) are filled when defined. Their column sums run over fixed blocks of
// rows and then over the blocks in order, so the result does not depend on the thread count.
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight);

}  // namespace accel::cpu
