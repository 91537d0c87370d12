// Vectorised exp/tanh/gelu for the CPU loops over contiguous f32/f64 runs. f32 tanh, gelu and their
// grads take the AVX-512 forms of tensor/cpu/activation_avx512.h where the target has them, else the
// AVX2 forms of tensor/cpu/activation_avx2.h (the same bits), else the scalar functions of
// kernels/activation_math.h; the rest are Eigen array maps, whose packet math evaluates exp 8 (or 4)
// lanes at a time where libm's expf is a scalar call that stops a loop from vectorising.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/elementwise_math.h"
#include "tensor/cpu/activation_avx2.h"
#include "tensor/cpu/activation_avx512.h"

namespace accel::cpu {

template <class C>
using VecMap = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
template <class C>
using ConstVecMap = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;

// The unary ops worth a vector form: their scalar form calls libm.
constexpr bool has_vector_form(UnaryOp op) {
  return op == UnaryOp::exp || op == UnaryOp::tanh || op == UnaryOp::sigmoid || op == UnaryOp::gelu;
}

// out[i] = op(in[i]) for i in [0, n), C float or double; the math of apply_unary in array form.
template <UnaryOp Op, class C>
void unary_vector(const C* in, C* out, int64_t n) {
  static_assert(std::is_floating_point_v<C>);
  if constexpr (std::is_same_v<C, float> && Op == UnaryOp::tanh) {
#if defined(ACCEL_HAVE_ACTIVATION_AVX512)
    avx512::tanh_f32(in, out, n);
#elif defined(ACCEL_HAVE_ACTIVATION_AVX2)
    avx2::tanh_f32(in, out, n);
#else
    for (int64_t i = 0; i < n; ++i) out[i] = tanh_f32(in[i]);
#endif
  } else if constexpr (std::is_same_v<C, float> && Op == UnaryOp::gelu) {
#if defined(ACCEL_HAVE_ACTIVATION_AVX512)
    avx512::gelu_f32(in, out, n);
#elif defined(ACCEL_HAVE_ACTIVATION_AVX2)
    avx2::gelu_f32(in, out, n);
#else
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_f32(in[i]);
#endif
  } else {
    const ConstVecMap<C> x(in, n);
    VecMap<C> y(out, n);
    if constexpr (Op == UnaryOp::exp) {
      y = x.exp();
    } else if constexpr (Op == UnaryOp::tanh) {
      y = x.tanh();
    } else if constexpr (Op == UnaryOp::sigmoid) {
      y = C(1) / (C(1) + (-x).exp());
    } else {
      static_assert(Op == UnaryOp::gelu);
      const C k = C(0.7978845608028654);  // sqrt(2 / pi), as in gelu_tanh
      y = C(0.5) * x * (C(1) + (k * (x + C(0.044715) * x * x * x)).tanh());
    }
  }
}

// out[i] = grad[i] * tanh_grad(x[i]) for i in [0, n).
template <class C>
void tanh_backward_vector(const C* grad, const C* x, C* out, int64_t n) {
#if defined(ACCEL_HAVE_ACTIVATION_AVX512)
  if constexpr (std::is_same_v<C, float>) {
    avx512::tanh_backward_f32(grad, x, out, n);
    return;
  }
#elif defined(ACCEL_HAVE_ACTIVATION_AVX2)
  if constexpr (std::is_same_v<C, float>) {
    avx2::tanh_backward_f32(grad, x, out, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * tanh_grad(x[i]);  // tanh_grad inlines: this vectorises
}

// out[i] = grad[i] * gelu_tanh_grad(x[i]) for i in [0, n); f64 in blocks so tanh is computed once.
template <class C>
void gelu_backward_vector(const C* grad, const C* x_in, C* out, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
#if defined(ACCEL_HAVE_ACTIVATION_AVX512)
    avx512::gelu_backward_f32(grad, x_in, out, n);
#elif defined(ACCEL_HAVE_ACTIVATION_AVX2)
    avx2::gelu_backward_f32(grad, x_in, out, n);
#else
    for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * gelu_grad_f32(x_in[i]);
#endif
  } else {
    constexpr int64_t kBlock = 256;
    const C k = C(0.7978845608028654), c = C(0.044715);
    alignas(64) C tanh_buf[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      const ConstVecMap<C> x(x_in + b, m), g(grad + b, m);
      VecMap<C> t(tanh_buf, m);
      t = (k * (x + c * x * x * x)).tanh();
      VecMap<C>(out + b, m) =
          g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x));
    }
  }
}

}  // namespace accel::cpu
