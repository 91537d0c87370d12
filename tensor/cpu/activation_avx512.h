// AVX-512 forms of the f32 tanh, GELU and their derivatives of kernels/activation_math.h for the CPU
// loops: the same operations lane for lane, so they give the scalar function's bits (tests/tensor/
// test_activation_avx512.cpp), with the 32-entry coefficient tables held in registers and looked up
// with one vpermt2ps each. Without AVX-512 the loops in vec_math.h take the AVX2 forms of
// tensor/cpu/activation_avx2.h, which give the same bits.
#pragma once

#include <cstdint>

#include "kernels/activation_math.h"
#include "tensor/cpu/activation_avx2.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(ACCEL_HAVE_ACTIVATION_AVX2)
#include <immintrin.h>

#define ACCEL_HAVE_ACTIVATION_AVX512 1

namespace accel::cpu::avx512 {

// A 32-entry float table in two registers; lookup(j) reads entry j mod 32 in each lane.
struct Table32 {
  __m512 lo, hi;
  explicit Table32(const float* t) : lo(_mm512_loadu_ps(t)), hi(_mm512_loadu_ps(t + 16)) {}
  __m512 operator[](__m512i j) const { return _mm512_permutex2var_ps(lo, j, hi); }
};

// One piecewise polynomial of kernels/activation_math.h: the centres and c0..cD.
template <int D>
struct Piecewise {
  Table32 center;
  Table32 c[D + 1];
  __m512 eval(__m512i j, __m512 x) const {  // tanh_detail::horner<D> at r = x - center[j]
    const __m512 r = _mm512_sub_ps(x, center[j]);
    __m512 p = c[D][j];
    for (int k = D - 1; k >= 0; --k) p = _mm512_fmadd_ps(p, r, c[k][j]);
    return p;
  }
};

inline Piecewise<5> tanh_piecewise() {
  using namespace activation_tables;
  return {Table32(kTanhCenter),
          {Table32(kTanhC0), Table32(kTanhC1), Table32(kTanhC2), Table32(kTanhC3), Table32(kTanhC4), Table32(kTanhC5)}};
}

inline Piecewise<6> tanh_grad_piecewise() {
  using namespace activation_tables;
  return {Table32(kTanhGradCenter),
          {Table32(kTanhGradC0), Table32(kTanhGradC1), Table32(kTanhGradC2), Table32(kTanhGradC3),
           Table32(kTanhGradC4), Table32(kTanhGradC5), Table32(kTanhGradC6)}};
}

// gelu_f32's tables: the cells' polynomials and the slope added last.
struct GeluTables {
  Piecewise<7> poly;
  Table32 slope;
};

inline GeluTables gelu_tables() {
  using namespace activation_tables;
  return {{Table32(kGeluCenter),
           {Table32(kGeluC0), Table32(kGeluC1), Table32(kGeluC2), Table32(kGeluC3), Table32(kGeluC4),
            Table32(kGeluC5), Table32(kGeluC6), Table32(kGeluC7)}},
          Table32(kGeluX)};
}

inline Piecewise<6> gelu_grad_piecewise() {
  using namespace activation_tables;
  return {Table32(kGeluGradCenter),
          {Table32(kGeluGradC0), Table32(kGeluGradC1), Table32(kGeluGradC2), Table32(kGeluGradC3),
           Table32(kGeluGradC4), Table32(kGeluGradC5), Table32(kGeluGradC6)}};
}

// kClamp < |x| ? kClamp : |x|, NaN passing as in the scalar form (vminps returns its second operand
// where either is NaN; vrangeps, one instruction for both and 4 % faster here, turns NaNs into kClamp).
inline __m512 clamped_abs(__m512 x) { return _mm512_min_ps(_mm512_set1_ps(tanh_detail::kClamp), _mm512_abs_ps(x)); }

// tanh_detail::interval(t): the float bits of t >> 20 (vpermt2ps reads the low 5 bits).
inline __m512i interval(__m512 t) { return _mm512_srli_epi32(_mm512_castps_si512(t), 20); }

// tanh_f32 on 16 lanes.
inline __m512 tanh16(const Piecewise<5>& pw, __m512 x) {
  const __m512 a = clamped_abs(x);
  const __m512 t = _mm512_add_ps(_mm512_set1_ps(1.0f), a);
  __m512 y = pw.eval(interval(t), a);
  y = _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(t, _mm512_set1_ps(1.5f), _CMP_LT_OQ), y, a);
  // copysign(y, x): bit select (0xd8) of x's sign bit into y
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(y), _mm512_castps_si512(x), sign, 0xd8));
}

// tanh_grad_f32 on 16 lanes.
inline __m512 tanh_grad16(const Piecewise<6>& pw, __m512 x) {
  const __m512 a = clamped_abs(x);
  return pw.eval(interval(_mm512_add_ps(_mm512_set1_ps(1.0f), a)), a);
}

// y with the lanes of x below kGeluLow (set in low) replaced by far_left's (avx2::gelu_far_left8), in
// halves of 8: only the halves holding such a lane, rare in activations (one lane in 700 of N(0, 2)).
inline __m512 blend_far_left(__mmask16 low, __m512 x, __m512 y) {
  __m256 y_lo = _mm512_castps512_ps256(y), y_hi = _mm512_extractf32x8_ps(y, 1);
  if (low & 0xff) y_lo = _mm256_mask_blend_ps(__mmask8(low), y_lo, avx2::gelu_far_left8(_mm512_castps512_ps256(x)));
  if (low >> 8) y_hi = _mm256_mask_blend_ps(__mmask8(low >> 8), y_hi, avx2::gelu_far_left8(_mm512_extractf32x8_ps(x, 1)));
  return _mm512_insertf32x8(_mm512_zextps256_ps512(y_lo), y_hi, 1);
}

// gelu_f32 on 16 lanes: vminps in the scalar form's operand order (NaN passes), the cell from the low
// bits of phi (vpermt2ps reads 5), and the lanes below kGeluLow by far_left.
inline __m512 gelu16(const GeluTables& t, __m512 x) {
  using namespace activation_tables;
  // maskz_min: GCC 12 warns, wrongly, that plain min_ps's undefined source is uninitialised here
  const __m512 xc = _mm512_maskz_min_ps(__mmask16(0xffff), _mm512_set1_ps(kGeluHigh), x);
  __m512 phi = _mm512_fmadd_ps(xc, _mm512_set1_ps(kGeluWarpC), _mm512_set1_ps(kGeluWarpB));
  phi = _mm512_fmadd_ps(phi, xc, _mm512_set1_ps(kGeluWarpA));
  phi = _mm512_fmadd_ps(phi, xc, _mm512_set1_ps(12582912.0f + kGeluZeroCell));
  const __m512i j = _mm512_castps_si512(phi);
  const __m512 y = _mm512_fmadd_ps(t.slope[j], x, t.poly.eval(j, xc));
  const __mmask16 low = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kGeluLow), _CMP_LT_OQ);
  return low ? blend_far_left(low, x, y) : y;
}

// gelu_grad_f32 on 16 lanes: min and max in the scalar form's operand order (NaN passes).
inline __m512 gelu_grad16(const Piecewise<6>& pw, __m512 x) {
  using namespace gelu_grad_detail;
  const __m512 xc = _mm512_max_ps(_mm512_set1_ps(kLow), _mm512_min_ps(_mm512_set1_ps(kHigh), x));
  const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(kInvStep), _mm512_set1_ps(kBias));
  return pw.eval(_mm512_castps_si512(t), xc);
}

// out[i] = f(in[i]) over [0, n): pairs of full vectors (two independent chains in flight, 6 % faster
// here), then one, then a masked tail (masked stores are slow on Zen 4).
template <class F>
inline void map16(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = f(_mm512_loadu_ps(in + i), i, __mmask16(0xffff));
    const __m512 b = f(_mm512_loadu_ps(in + i + 16), i + 16, __mmask16(0xffff));
    _mm512_storeu_ps(out + i, a);
    _mm512_storeu_ps(out + i + 16, b);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, f(_mm512_loadu_ps(in + i), i, __mmask16(0xffff)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, f(_mm512_maskz_loadu_ps(m, in + i), i, m));
  }
}

inline void tanh_f32(const float* in, float* out, int64_t n) {
  const Piecewise<5> pw = tanh_piecewise();
  map16(in, out, n, [&](__m512 x, int64_t, __mmask16) { return tanh16(pw, x); });
}

inline void gelu_f32(const float* in, float* out, int64_t n) {
  const GeluTables t = gelu_tables();
  map16(in, out, n, [&](__m512 x, int64_t, __mmask16) { return gelu16(t, x); });
}

// out = grad * tanh_grad_f32(x)
inline void tanh_backward_f32(const float* grad, const float* x, float* out, int64_t n) {
  const Piecewise<6> pw = tanh_grad_piecewise();
  map16(x, out, n, [&](__m512 v, int64_t i, __mmask16 m) {
    return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, grad + i), tanh_grad16(pw, v));
  });
}

// out = grad * gelu_grad_f32(x)
inline void gelu_backward_f32(const float* grad, const float* x, float* out, int64_t n) {
  const Piecewise<6> pw = gelu_grad_piecewise();
  map16(x, out, n, [&](__m512 v, int64_t i, __mmask16 m) {
    return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, grad + i), gelu_grad16(pw, v));
  });
}

}  // namespace accel::cpu::avx512

#endif
