// CUDA twins of tensor/cpu/layer_norm.h: layer norm over the last dim of a contiguous [rows, dim]
// tensor and its backward pass. The weight and bias grads are summed over fixed chunks of rows and
// then over the chunks in order: deterministic, without atomics.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight);

}  // namespace accel::cuda
