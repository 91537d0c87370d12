// CUDA twins of tensor/cpu/elementwise.h: the same signatures, inputs already checked and broadcast
// to out's shape by the op entry points; each queues kernels on the device's compute stream.
#pragma once

#include "kernels/elementwise_math.h"
#include "tensor/tensor.h"

namespace accel::cuda {

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void unary(UnaryOp op, const Tensor& out, const Tensor& in);
void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void logical_not(const Tensor& out, const Tensor& in);
void isfinite(const Tensor& out, const Tensor& in);
void tanh_backward(const Tensor& out, const Tensor& grad, const Tensor& x);
void gelu_backward(const Tensor& out, const Tensor& grad, const Tensor& x);
void add_scaled(const Tensor& self, const Tensor& other, double alpha);  // self += alpha * other
void scale(const Tensor& self, double value);
void fill(const Tensor& self, double value);

}  // namespace accel::cuda
