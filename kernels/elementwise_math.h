// Per-element math of the elementwise ops, shared by the CPU loops and the CUDA kernels.
// C is the compute type: float (for f32/f16/bf16), double, or int64_t.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/activation_math.h"
#include "kernels/hd.h"

namespace accel {

enum class BinaryOp : uint8_t { add, sub, mul, div, pow, maximum, minimum };
enum class UnaryOp : uint8_t { neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu };
enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge };

const char* op_name(BinaryOp op);
const char* op_name(UnaryOp op);
const char* op_name(CompareOp op);
// Ops whose math only makes sense in floating point (integers would truncate or trap).
constexpr bool needs_floating(BinaryOp op) { return op == BinaryOp::div || op == BinaryOp::pow; }
constexpr bool needs_floating(UnaryOp op) {
  return op != UnaryOp::neg && op != UnaryOp::abs && op != UnaryOp::relu;
}

ACCEL_HD float math_exp(float x) { return expf(x); }
ACCEL_HD double math_exp(double x) { return ::exp(x); }
ACCEL_HD float math_log(float x) { return logf(x); }
ACCEL_HD double math_log(double x) { return ::log(x); }
ACCEL_HD float math_sqrt(float x) { return sqrtf(x); }
ACCEL_HD double math_sqrt(double x) { return ::sqrt(x); }
ACCEL_HD_INLINE float math_tanh(float x) { return tanh_f32(x); }  // within an ulp, unlike tanhf
ACCEL_HD double math_tanh(double x) { return ::tanh(x); }
ACCEL_HD float math_pow(float x, float y) { return powf(x, y); }
ACCEL_HD double math_pow(double x, double y) { return ::pow(x, y); }

// d tanh(x)/dx from x (not from a rounded tanh(x), whose 1 - y^2 cancels where tanh saturates).
template <class C>
ACCEL_HD_INLINE C tanh_grad(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return tanh_grad_f32(x);
  } else {
    const C e = math_exp(C(-2) * (x < C(0) ? -x : x)), d = C(1) + e;
    return C(4) * e / (d * d);
  }
}

// gelu with the tanh approximation (GPT-2's), and its derivative. f32 (and so f16/bf16) takes the
// accurate forms of kernels/activation_math.h; f64 has digits to spare for the textbook ones.
template <class C>
ACCEL_HD_INLINE C gelu_tanh(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return gelu_f32(x);
  } else {
    const C k = C(0.7978845608028654);  // sqrt(2 / pi)
    return C(0.5) * x * (C(1) + math_tanh(k * (x + C(0.044715) * x * x * x)));
  }
}

template <class C>
ACCEL_HD_INLINE C gelu_tanh_grad(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return gelu_grad_f32(x);
  } else {
    const C k = C(0.7978845608028654);
    const C t = math_tanh(k * (x + C(0.044715) * x * x * x));
    return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * C(0.044715) * x * x);
  }
}

// relu's grad given its output y: the grad passes where y > 0 (so not at 0 or NaN).
template <class C>
ACCEL_HD C relu_grad(C grad, C y) {
  return y > C(0) ? grad : C(0);
}

template <BinaryOp Op, class C>
ACCEL_HD C apply_binary(C a, C b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  else if constexpr (Op == BinaryOp::sub) return a - b;
  else if constexpr (Op == BinaryOp::mul) return a * b;
  else if constexpr (Op == BinaryOp::div) return a / b;
  else if constexpr (Op == BinaryOp::pow) return math_pow(a, b);
  // maximum/minimum propagate NaN, as numpy's do.
  else if constexpr (Op == BinaryOp::maximum) return (a > b || a != a) ? a : b;
  else return (a < b || a != a) ? a : b;
}

template <UnaryOp Op, class C>
ACCEL_HD C apply_unary(C x) {
  if constexpr (Op == UnaryOp::neg) return -x;
  else if constexpr (Op == UnaryOp::abs) return x < C(0) ? -x : x;
  else if constexpr (Op == UnaryOp::relu) return x > C(0) ? x : C(0);
  else if constexpr (Op == UnaryOp::exp) return math_exp(x);
  else if constexpr (Op == UnaryOp::log) return math_log(x);
  else if constexpr (Op == UnaryOp::sqrt) return math_sqrt(x);
  else if constexpr (Op == UnaryOp::tanh) return math_tanh(x);
  else if constexpr (Op == UnaryOp::sigmoid) return C(1) / (C(1) + math_exp(-x));
  else return gelu_tanh(x);
}

template <CompareOp Op, class C>
ACCEL_HD bool apply_compare(C a, C b) {
  if constexpr (Op == CompareOp::eq) return a == b;
  else if constexpr (Op == CompareOp::ne) return a != b;
  else if constexpr (Op == CompareOp::lt) return a < b;
  else if constexpr (Op == CompareOp::le) return a <= b;
  else if constexpr (Op == CompareOp::gt) return a > b;
  else return a >= b;
}

}  // namespace accel
