// Raw elementwise ops with numpy broadcasting: arithmetic, math functions, comparisons, where and
// in-place updates. Both operands of a binary op must share dtype and device. Halves compute in f32.
#pragma once

#include "tensor/tensor.h"

namespace accel::nograd {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Scalar forms: the scalar takes a's dtype.
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);

Tensor neg(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor gelu(const Tensor& t);  // tanh approximation
// d tanh(x)/dx * grad from the input x (1 - tanh(x)^2 from a rounded tanh(x) would cancel where
// tanh saturates), for autograd.
Tensor tanh_backward(const Tensor& grad, const Tensor& x);
// d gelu(x)/dx * grad, for autograd.
Tensor gelu_backward(const Tensor& grad, const Tensor& x);
// grad where relu's output y is positive, else 0: relu's backward in one pass.
Tensor relu_backward(const Tensor& grad, const Tensor& y);

// Comparisons return bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& t);
// True where t is neither inf nor NaN.
Tensor isfinite(const Tensor& t);

// cond ? a : b elementwise; cond is bool; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// t with value wherever mask (bool, broadcastable to t) is true.
Tensor masked_fill(const Tensor& t, const Tensor& mask, double value);

// In place on self (self's shape is kept; other broadcasts to it).
void add_(const Tensor& self, const Tensor& other, double alpha = 1.0);  // self += alpha * other
void mul_(const Tensor& self, double value);
void fill_(const Tensor& self, double value);
void zero_(const Tensor& self);

}  // namespace accel::nograd
