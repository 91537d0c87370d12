// The f32 tanh, gelu and layer_norm that accel computed before issue 18, kept here only as the
// reference bench/op_accuracy.cpp times and measures against: Eigen's rational tanh (up to 4 ulp),
// 0.5 x (1 + tanh u) for gelu, tanh's grad as 1 - y^2 from its rounded output in three ops, and
// layer norm row sums taken one element at a time. Each writes a fresh output, as the ops do.
#pragma once

#include "tensor/nograd/nn_ops.h"
#include "tensor/tensor.h"

namespace accel::bench::previous {

Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);
Tensor gelu_backward(const Tensor& grad, const Tensor& x);
// autograd's TanhBackward before: grad * (1 - y * y) from the output y.
Tensor tanh_backward_from_output(const Tensor& grad, const Tensor& y);
// x [rows, dim], weight and bias [dim], all f32 and contiguous.
nograd::LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
nograd::LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                           const Tensor& rstd, const Tensor& weight);

}  // namespace accel::bench::previous
