// tanh and the tanh-form GELU in f32, with their derivatives computed from the input, shared by the
// CPU loops and the CUDA kernels. Forward results are within about an ulp of the f64 function and
// derivatives within about 2e-7 relative (see tests/kernels/test_activation_math.cpp); libm's tanhf
// is 2 ulp here and 1 - tanh^2 from a rounded tanh loses most of its digits where tanh saturates.
// tanh, GELU and both derivatives are piecewise polynomials (kernels/activation_tables.h), whose
// AVX-512 and AVX2 forms (tensor/cpu/activation_avx512.h, activation_avx2.h) give these functions'
// bits; GELU below x = -6 is x e^(2u).
// All arithmetic (no libm call); it needs hardware fma to be fast.
#pragma once

#include <cmath>

#include "kernels/activation_tables.h"
#include "kernels/double_float.h"
#include "kernels/exp_math.h"
#include "kernels/half.h"
#include "kernels/hd.h"

namespace accel {

namespace tanh_detail {

using namespace activation_tables;

// |x| is clamped into [13, 15), where the tables are constant (tanh 1, its derivative 0); NaN passes.
constexpr float kClamp = 14.0f;

// The table entry of a = |x|: the top bits of t = 1 + a (its exponent and 3 mantissa bits, mod 32),
// so intervals are 1/8 wide below a = 1 and double with each octave of t, out to width 1 at a = 7.
ACCEL_HD_INLINE uint32_t interval(float t) { return (float_bits(t) >> 20) & 31u; }

// sum_k c_k[j] r^k (k = 0 .. D) by Horner in fma: what the AVX-512 loop computes lane for lane.
template <int D>
ACCEL_HD_INLINE float horner(const float* const (&c)[D + 1], uint32_t j, float r) {
  float p = c[D][j];
  for (int k = D - 1; k >= 0; --k) p = fmaf(p, r, c[k][j]);
  return p;
}

}  // namespace tanh_detail

// tanh(x) within an ulp, division-free: a degree-5 polynomial in a - centre on 32 intervals of
// a = |x| (kernels/activation_tables.h). Each centre is a float where tanh is within a few percent
// of an ulp of a float, so the constant term is exact and the rest is under a third of the result.
// Below a = 0.5 the polynomial is tanh(a) - a, added to a last: a stays exact and the result keeps
// its relative accuracy down to denormals.
ACCEL_HD_INLINE float tanh_f32(float x) {
  using namespace tanh_detail;
  const float a0 = fabsf(x);
  const float a = kClamp < a0 ? kClamp : a0;
  const float t = 1.0f + a;
  const uint32_t j = interval(t);
  const float* const c[6] = {kTanhC0, kTanhC1, kTanhC2, kTanhC3, kTanhC4, kTanhC5};
  const float y = horner<5>(c, j, a - kTanhCenter[j]);
  return copysignf(t < 1.5f ? y + a : y, x);  // odd, -0 included
}

// d tanh(x)/dx = sech^2(x) from x, within about 1e-7 relative where it is above 1e-3 and 1e-10
// absolute below (where 1 - y^2 from a rounded y = tanh(x) would be off by up to 3e-8 / (1 - |y|)
// relative): the same intervals with degree-6 polynomials, 0 beyond |x| = 13.
ACCEL_HD_INLINE float tanh_grad_f32(float x) {
  using namespace tanh_detail;
  const float a0 = fabsf(x);
  const float a = kClamp < a0 ? kClamp : a0;
  const uint32_t j = interval(1.0f + a);
  const float* const c[7] = {kTanhGradC0, kTanhGradC1, kTanhGradC2, kTanhGradC3,
                             kTanhGradC4, kTanhGradC5, kTanhGradC6};
  return horner<6>(c, j, a - kTanhGradCenter[j]);
}

namespace gelu_detail {

// GELU(x) = x sigma(2u) with u = k (x + c x^3) = x (k + k c x^2), k = sqrt(2 / pi), c = 0.044715.
constexpr double kSqrt2OverPi = 0.7978845608028654, kCubic = 0.044715;
constexpr Float2 kK = split_constant(kSqrt2OverPi), kKC = split_constant(kSqrt2OverPi * kCubic);

// GELU(x) is x to f32 precision above this and flushes to zero below minus it: sigma(2u) there is
// 1 - 1e-38 or less than 1e-38, and 2|u| <= 87.3 keeps exp(-2u) inside exp_split's domain.
constexpr float kSaturation = 10.0f;

}  // namespace gelu_detail

namespace gelu_table_detail {

using namespace activation_tables;

// GELU below kGeluLow: x e^(2u), as there e^(2u) < 1.4e-11 and x sigma(2u) = x e^(2u) / (1 + e^(2u))
// differs from it by less than 2^-36 relative; so no division. e^(2u) is taken times 2^64 (exactly)
// and the result scaled back: e^(2u) reaches 1e-38 at x = -10, where its low part, and x times it,
// would be subnormals, which cost a microcode assist each (9x slower over all-negative input). Below
// -10 it flushes to -0; NaN never comes here. u is carried in double-float: e^(2u) multiplies any
// relative error of u by 2|u|, up to 87 here.
inline constexpr uint32_t kFarLeftShift = 64;
inline constexpr float kFarLeftUnscale = 0x1p-64f;  // 2^-kFarLeftShift

ACCEL_HD_INLINE float far_left(float x) {
  using namespace gelu_detail;
  const float xc = x < -kSaturation ? -kSaturation : x;
  const Float2 u = odd_cubic(xc, kK, kKC);
  const Float2 e = exp_split(2.0f * u.hi, 2.0f * u.lo, kFarLeftShift);
  return x < -kSaturation ? -0.0f : fmaf(x, e.hi, x * e.lo) * kFarLeftUnscale;
}

// The cell of x: round(phi(x)) + kGeluZeroCell mod 32 from the low bits of phi(x) + 1.5 * 2^23 + the
// zero cell, phi(x) = x (A + x (B + C x)) by Horner in fma (bench/fit_activation_tables.cpp).
ACCEL_HD_INLINE uint32_t cell(float xc) {
  const float phi_biased = fmaf(fmaf(fmaf(xc, kGeluWarpC, kGeluWarpB), xc, kGeluWarpA), xc, 12582912.0f + kGeluZeroCell);
  return float_bits(phi_biased) & 31u;
}

}  // namespace gelu_table_detail

// GELU within 1.0 ulp from x = -6 (kGeluLow) and 1.15 below, where the result is at least 1e-36 in
// magnitude, division-free: below kGeluLow far_left; from it a degree-7 polynomial in x - centre on 32
// cells of a warped grid, whose centres are floats where GELU is nearly a float, placed so that the
// terms after the constant stay under about 0.6 of the result; each cell adds kGeluX[j] x last. In
// cell 31 (x from 5.88; x above kGeluHigh = 6.54 takes its cell) that is x and the polynomial is 0;
// in the cell around 0 it is x / 2 and the polynomial GELU(x) - x / 2, so -0 gives -0. NaN passes.
ACCEL_HD_INLINE float gelu_f32(float x) {
  using namespace gelu_table_detail;
  if (x < kGeluLow) return far_left(x);
  const float xc = kGeluHigh < x ? kGeluHigh : x;
  const uint32_t j = cell(xc);
  const float* const c[8] = {kGeluC0, kGeluC1, kGeluC2, kGeluC3, kGeluC4, kGeluC5, kGeluC6, kGeluC7};
  return fmaf(kGeluX[j], x, tanh_detail::horner<7>(c, j, xc - kGeluCenter[j]));
}

namespace gelu_grad_detail {

// x is clamped to [kLow, kHigh], where the table's end cells hold 0 and 1 (the grad is below 1e-9
// from x = -6.44 and 1 to 1e-11 from 6.03). The cell is round(x / 0.416) + 16 mod 32, from the low
// bits of x / 0.416 + 16 + 1.5 * 2^23 (bench/fit_activation_tables.cpp, kGeluGradStep).
constexpr float kLow = -6.6f, kHigh = 6.3f, kInvStep = static_cast<float>(1 / 0.416), kBias = 12582912.0f + 16.0f;

ACCEL_HD_INLINE float clamp(float x) {  // NaN passes
  const float hi = kHigh < x ? kHigh : x;
  return kLow > hi ? kLow : hi;
}

ACCEL_HD_INLINE uint32_t cell(float xc) { return float_bits(fmaf(xc, kInvStep, kBias)) & 31u; }

}  // namespace gelu_grad_detail

// d GELU(x)/dx = sigma (1 + B (1 - sigma)), sigma = sigma(2u), B = 2 x du/dx, as a degree-6
// polynomial in x - centre on 30 cells of width 0.416 over [-6.44, 6.03]: within about 2e-7 relative,
// floored at 1e-3 (the tests' measure), and 1e-9 absolute at its zero (x = -0.7525), where a
// cell is centred so that the constant term is (nearly) 0.
ACCEL_HD_INLINE float gelu_grad_f32(float x) {
  using namespace gelu_grad_detail;
  using namespace activation_tables;
  const float xc = clamp(x);
  const uint32_t j = cell(xc);
  const float* const c[7] = {kGeluGradC0, kGeluGradC1, kGeluGradC2, kGeluGradC3,
                             kGeluGradC4, kGeluGradC5, kGeluGradC6};
  return tanh_detail::horner<6>(c, j, xc - kGeluGradCenter[j]);
}

}  // namespace accel
