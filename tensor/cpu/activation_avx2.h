// AVX2 (+FMA) forms of the f32 tanh, GELU and their derivatives of kernels/activation_math.h for the
// CPU loops without AVX-512: the same operations lane for lane as the scalar functions and the
// AVX-512 forms (tensor/cpu/activation_avx512.h), so every build gives the scalar bits (tests/tensor/
// test_activation_avx2.cpp); and GELU's path below x = -6, which the AVX-512 form takes from here.
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

// gelu_table_detail::far_left on 8 lanes.
inline __m256 gelu_far_left8(__m256 x) {
  using namespace gelu_detail;
  using gelu_table_detail::kFarLeftShift, gelu_table_detail::kFarLeftUnscale;
  const __m256 neg_sat = splat(-kSaturation);
  const __m256 xc = select_less(x, neg_sat, neg_sat, x);
  const Float2x8 u = odd_cubic(xc, kK, kKC);
  const Float2x8 e = exp_split(_mm256_add_ps(u.hi, u.hi), _mm256_add_ps(u.lo, u.lo), kFarLeftShift);
  const __m256 out = _mm256_mul_ps(_mm256_fmadd_ps(x, e.hi, _mm256_mul_ps(x, e.lo)), splat(kFarLeftUnscale));
  return select_less(x, neg_sat, splat(-0.0f), out);
}

// The tables of one piecewise polynomial of kernels/activation_tables.h cell by cell: row j holds
// entry j of each table in turn, zero-padded to N floats (a power of two), so that a lane's
// coefficients are a few 16-byte loads. Four register tables and vpermps on each with two blendv
// levels ran GELU 1.35x slower on a Zen 4 EPYC's AVX2 build (bench/README.md), vgatherdps 3.1x.
template <int N>
struct CellRows {
  alignas(64) float v[32][N];
};

template <int N, int K>
constexpr CellRows<N> cell_rows(const float* const (&tables)[K]) {
  static_assert(K <= N && (N & (N - 1)) == 0);
  CellRows<N> rows{};
  for (int j = 0; j < 32; ++j)
    for (int k = 0; k < K; ++k) rows.v[j][k] = tables[k][j];
  return rows;
}

inline constexpr CellRows<8> kTanhRows = cell_rows<8>({activation_tables::kTanhC0, activation_tables::kTanhC1,
    activation_tables::kTanhC2, activation_tables::kTanhC3, activation_tables::kTanhC4, activation_tables::kTanhC5,
    activation_tables::kTanhCenter});
inline constexpr CellRows<8> kTanhGradRows = cell_rows<8>({activation_tables::kTanhGradC0,
    activation_tables::kTanhGradC1, activation_tables::kTanhGradC2, activation_tables::kTanhGradC3,
    activation_tables::kTanhGradC4, activation_tables::kTanhGradC5, activation_tables::kTanhGradC6,
    activation_tables::kTanhGradCenter});
inline constexpr CellRows<16> kGeluRows = cell_rows<16>({activation_tables::kGeluC0, activation_tables::kGeluC1,
    activation_tables::kGeluC2, activation_tables::kGeluC3, activation_tables::kGeluC4, activation_tables::kGeluC5,
    activation_tables::kGeluC6, activation_tables::kGeluC7, activation_tables::kGeluCenter, activation_tables::kGeluX});
inline constexpr CellRows<8> kGeluGradRows = cell_rows<8>({activation_tables::kGeluGradC0,
    activation_tables::kGeluGradC1, activation_tables::kGeluGradC2, activation_tables::kGeluGradC3,
    activation_tables::kGeluGradC4, activation_tables::kGeluGradC5, activation_tables::kGeluGradC6,
    activation_tables::kGeluGradCenter});

// The per-vector functions below are always_inline: GCC 12 otherwise calls lookup and gelu8 out of
// line, 3x slower, the coefficient arrays then going through memory.

// 4x4 transposes within each 128-bit half: out[k] holds element k of a[0..3] in each half.
[[gnu::always_inline]] inline void transpose4(const __m256 (&a)[4], __m256* out) {
  const auto lo_pairs = [](__m256 p, __m256 q) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(p), _mm256_castps_pd(q)));
  };
  const auto hi_pairs = [](__m256 p, __m256 q) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(p), _mm256_castps_pd(q)));
  };
  const __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
  const __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
  out[0] = lo_pairs(t0, t2);
  out[1] = hi_pairs(t0, t2);
  out[2] = lo_pairs(t1, t3);
  out[3] = hi_pairs(t1, t3);
}

// out[k] = entry k of the row of each lane's cell j mod 32, for k < K (a multiple of 4): lane i's and
// lane i + 4's 16 bytes loaded into one register's halves, then transposed within the halves. The
// rows' byte offsets leave the vector two lanes to a 64-bit move.
template <int K, int N>
[[gnu::always_inline]] inline void lookup(const CellRows<N>& rows, __m256i j, __m256 (&out)[K]) {
  static_assert(K % 4 == 0 && K <= N);
  constexpr int kRowShift = N == 8 ? 5 : 6;  // log2 of the row's bytes
  static_assert(N * 4 == 1 << kRowShift);
  const __m256i offset = _mm256_slli_epi32(_mm256_and_si256(j, _mm256_set1_epi32(31)), kRowShift);
  const __m128i lo = _mm256_castsi256_si128(offset), hi = _mm256_extracti128_si256(offset, 1);
  const uint64_t pairs[4] = {static_cast<uint64_t>(_mm_cvtsi128_si64(lo)), static_cast<uint64_t>(_mm_extract_epi64(lo, 1)),
                             static_cast<uint64_t>(_mm_cvtsi128_si64(hi)), static_cast<uint64_t>(_mm_extract_epi64(hi, 1))};
  const char* base = reinterpret_cast<const char*>(rows.v);
  const float* row[8];
  for (int p = 0; p < 4; ++p) {
    row[2 * p] = reinterpret_cast<const float*>(base + static_cast<uint32_t>(pairs[p]));
    row[2 * p + 1] = reinterpret_cast<const float*>(base + (pairs[p] >> 32));
  }
  const auto halves = [&](int lane, int k) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_load_ps(row[lane] + k)), _mm_load_ps(row[lane + 4] + k), 1);
  };
  for (int k = 0; k < K; k += 4) transpose4({halves(0, k), halves(1, k), halves(2, k), halves(3, k)}, out + k);
}

// tanh_detail::horner<D> at r = x - centre, c[0..D] the coefficients and c[D + 1] the centre.
template <int D, int K>
[[gnu::always_inline]] inline __m256 horner(const __m256 (&c)[K], __m256 x) {
  static_assert(D + 2 <= K);
  const __m256 r = _mm256_sub_ps(x, c[D + 1]);
  __m256 p = c[D];
  for (int k = D - 1; k >= 0; --k) p = _mm256_fmadd_ps(p, r, c[k]);
  return p;
}

// kClamp < |x| ? kClamp : |x|, NaN passing as in the scalar form (vminps returns its second operand
// where either is NaN).
[[gnu::always_inline]] inline __m256 clamped_abs(__m256 x) {
  const __m256 abs = _mm256_andnot_ps(splat(-0.0f), x);
  return _mm256_min_ps(splat(tanh_detail::kClamp), abs);
}

// tanh_detail::interval(t) before its mod 32, which lookup takes.
[[gnu::always_inline]] inline __m256i interval(__m256 t) { return _mm256_srli_epi32(_mm256_castps_si256(t), 20); }

// tanh_f32 on 8 lanes.
[[gnu::always_inline]] inline __m256 tanh8(__m256 x) {
  const __m256 a = clamped_abs(x);
  const __m256 t = _mm256_add_ps(splat(1.0f), a);
  __m256 c[8];
  lookup(kTanhRows, interval(t), c);
  __m256 y = horner<5>(c, a);
  y = _mm256_blendv_ps(y, _mm256_add_ps(y, a), _mm256_cmp_ps(t, splat(1.5f), _CMP_LT_OQ));
  // copysign(y, x)
  const __m256 sign = splat(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, y), _mm256_and_ps(sign, x));
}

// tanh_grad_f32 on 8 lanes.
[[gnu::always_inline]] inline __m256 tanh_grad8(__m256 x) {
  const __m256 a = clamped_abs(x);
  __m256 c[8];
  lookup(kTanhGradRows, interval(_mm256_add_ps(splat(1.0f), a)), c);
  return horner<6>(c, a);
}

// gelu_f32 on 8 lanes: vminps in the scalar form's operand order (NaN passes), the cell from the low
// bits of phi, and the lanes below kGeluLow, rare in activations, by far_left when there are any.
[[gnu::always_inline]] inline __m256 gelu8(__m256 x) {
  using namespace activation_tables;
  const __m256 xc = _mm256_min_ps(splat(kGeluHigh), x);
  __m256 phi = _mm256_fmadd_ps(xc, splat(kGeluWarpC), splat(kGeluWarpB));
  phi = _mm256_fmadd_ps(phi, xc, splat(kGeluWarpA));
  phi = _mm256_fmadd_ps(phi, xc, splat(12582912.0f + kGeluZeroCell));
  __m256 c[12];  // c0..c7, the centre, the slope
  lookup(kGeluRows, _mm256_castps_si256(phi), c);
  const __m256 y = _mm256_fmadd_ps(c[9], x, horner<7>(c, xc));
  const __m256 low = _mm256_cmp_ps(x, splat(kGeluLow), _CMP_LT_OQ);
  return _mm256_movemask_ps(low) ? _mm256_blendv_ps(y, gelu_far_left8(x), low) : y;
}

// gelu_grad_f32 on 8 lanes: min and max in the scalar form's operand order (NaN passes).
[[gnu::always_inline]] inline __m256 gelu_grad8(__m256 x) {
  using namespace gelu_grad_detail;
  const __m256 xc = _mm256_max_ps(splat(kLow), _mm256_min_ps(splat(kHigh), x));
  __m256 c[8];
  lookup(kGeluGradRows, _mm256_castps_si256(_mm256_fmadd_ps(xc, splat(kInvStep), splat(kBias))), c);
  return horner<6>(c, xc);
}

// out[i] = f(in[i]) over [0, n): pairs of vectors, as the AVX-512 loop runs, then one, then the tail
// by scalar(i). flatten: GCC 12 otherwise calls f out of line each vector.
template <class F, class Scalar>
[[gnu::flatten]] inline void map8(const float* in, float* out, int64_t n, F f, Scalar scalar) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = f(_mm256_loadu_ps(in + i), i);
    const __m256 b = f(_mm256_loadu_ps(in + i + 8), i + 8);
    _mm256_storeu_ps(out + i, a);
    _mm256_storeu_ps(out + i + 8, b);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(in + i), i));
  for (; i < n; ++i) out[i] = scalar(i);
}

inline void tanh_f32(const float* in, float* out, int64_t n) {
  map8(in, out, n, [](__m256 x, int64_t) { return tanh8(x); }, [&](int64_t i) { return accel::tanh_f32(in[i]); });
}

inline void gelu_f32(const float* in, float* out, int64_t n) {
  map8(in, out, n, [](__m256 x, int64_t) { return gelu8(x); }, [&](int64_t i) { return accel::gelu_f32(in[i]); });
}

// out = grad * tanh_grad_f32(x)
inline void tanh_backward_f32(const float* grad, const float* x, float* out, int64_t n) {
  map8(
      x, out, n, [&](__m256 v, int64_t i) { return _mm256_mul_ps(_mm256_loadu_ps(grad + i), tanh_grad8(v)); },
      [&](int64_t i) { return grad[i] * tanh_grad_f32(x[i]); });
}

// out = grad * gelu_grad_f32(x)
inline void gelu_backward_f32(const float* grad, const float* x, float* out, int64_t n) {
  map8(
      x, out, n, [&](__m256 v, int64_t i) { return _mm256_mul_ps(_mm256_loadu_ps(grad + i), gelu_grad8(v)); },
      [&](int64_t i) { return grad[i] * gelu_grad_f32(x[i]); });
}

}  // namespace accel::cpu::avx2

#endif
