// AVX2 form of GELU's exp-based f32 forward (kernels/activation_math.h, gelu_exp_f32): the CPU loop on
// machines without AVX-512, and the AVX-512 loop's lanes below kGeluLow. The same operations lane for
// lane, so it gives the scalar function's bits (tests/tensor/test_activation_avx2.cpp). GCC 12 does
// not vectorise the scalar loop (the clamp before the exp leaves control flow in it): 20x slower.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <cstdint>

#include "kernels/activation_math.h"

#define ACCEL_HAVE_ACTIVATION_AVX2 1

namespace accel::cpu::avx2 {

struct Float2x8 {
  __m256 hi, lo;
};

inline __m256 splat(float v) { return _mm256_set1_ps(v); }

// kernels/double_float.h's error-free products and sums, and odd_cubic, on 8 lanes.
inline Float2x8 two_prod(__m256 a, __m256 b) {
  const __m256 p = _mm256_mul_ps(a, b);
  return {p, _mm256_fmsub_ps(a, b, p)};
}

inline Float2x8 two_sum(__m256 a, __m256 b) {
  const __m256 s = _mm256_add_ps(a, b), bb = _mm256_sub_ps(s, a);
  return {s, _mm256_add_ps(_mm256_sub_ps(a, _mm256_sub_ps(s, bb)), _mm256_sub_ps(b, bb))};
}

inline Float2x8 odd_cubic(__m256 x, Float2 a, Float2 b) {
  const Float2x8 x2 = two_prod(x, x);
  Float2x8 p = two_prod(splat(b.hi), x2.hi);
  p.lo = _mm256_fmadd_ps(splat(b.lo), x2.hi, _mm256_fmadd_ps(splat(b.hi), x2.lo, p.lo));
  Float2x8 s = two_sum(splat(a.hi), p.hi);
  s.lo = _mm256_add_ps(s.lo, _mm256_add_ps(splat(a.lo), p.lo));
  Float2x8 u = two_prod(x, s.hi);
  u.lo = _mm256_fmadd_ps(x, s.lo, u.lo);
  return u;
}

// kernels/exp_math.h's exp_split on 8 lanes.
inline Float2x8 exp_split(__m256 v, __m256 lo, uint32_t k = 0) {
  const __m256 round_magic = splat(12582912.0f);
  const __m256 t = _mm256_fmadd_ps(v, splat(1.44269504f), round_magic);
  const __m256 n = _mm256_sub_ps(t, round_magic);
  __m256 r = _mm256_fmadd_ps(n, splat(-0.693359375f), v);
  r = _mm256_add_ps(_mm256_fmadd_ps(n, splat(2.12194440e-4f), r), lo);
  __m256 p = splat(1.375138876e-03f);
  p = _mm256_fmadd_ps(p, r, splat(8.368921466e-03f));
  p = _mm256_fmadd_ps(p, r, splat(4.166953266e-02f));
  p = _mm256_fmadd_ps(p, r, splat(1.666651815e-01f));
  p = _mm256_fmadd_ps(p, r, splat(4.999998808e-01f));
  p = _mm256_fmadd_ps(p, r, splat(1.0f));
  const __m256 one = splat(1.0f);
  const __m256 y = _mm256_fmadd_ps(p, r, one);
  const __m256 y_lo = _mm256_fmadd_ps(p, r, _mm256_sub_ps(one, y));
  const __m256i exponent = _mm256_add_epi32(_mm256_set1_epi32(0x3f800000), _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(static_cast<int>(k))), 23));
  const __m256 scale = _mm256_castsi256_ps(exponent);
  return {_mm256_mul_ps(y, scale), _mm256_mul_ps(y_lo, scale)};
}

// a < b ? if_less : otherwise, false for NaN as in the scalar form.
inline __m256 select_less(__m256 a, __m256 b, __m256 if_less, __m256 otherwise) {
  return _mm256_blendv_ps(otherwise, if_less, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}

// gelu_exp_f32 on 8 lanes.
inline __m256 gelu_exp8(__m256 x) {
  using namespace gelu_detail;
  const __m256 sat = splat(kSaturation), neg_sat = splat(-kSaturation);
  const __m256 hi = select_less(sat, x, sat, x);
  const __m256 xc = select_less(hi, neg_sat, neg_sat, hi);
  const Float2x8 u = odd_cubic(xc, kK, kKC);
  const Float2x8 e = exp_split(_mm256_mul_ps(splat(-2.0f), u.hi), _mm256_mul_ps(splat(-2.0f), u.lo));
  Float2x8 d = two_sum(splat(1.0f), e.hi);
  d.lo = _mm256_add_ps(d.lo, e.lo);
  const __m256 rd = _mm256_div_ps(splat(1.0f), d.hi);
  const __m256 q = _mm256_mul_ps(x, rd);
  const __m256 q_res = _mm256_sub_ps(_mm256_fnmadd_ps(q, d.hi, x), _mm256_mul_ps(q, d.lo));
  const __m256 out = _mm256_fmadd_ps(q_res, rd, q);
  return select_less(sat, x, x, select_less(x, neg_sat, splat(-0.0f), out));
}

// out[i] = gelu_exp_f32(in[i]) over [0, n): whole vectors, the tail by the scalar function.
inline void gelu_exp_f32(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu_exp8(_mm256_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = accel::gelu_exp_f32(in[i]);
}

}  // namespace accel::cpu::avx2

#endif
