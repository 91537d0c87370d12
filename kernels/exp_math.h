// exp in f32 as arithmetic only (a polynomial times a power of two), so the CPU loops vectorise it
// and the CUDA kernels run the same instructions. Within one ulp of the f64 result; exp_split also
// returns the rounding error of its last step, for callers that need e^v to better than an ulp.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/double_float.h"
#include "kernels/half.h"
#include "kernels/hd.h"

namespace accel {

// e^(v + lo) as hi + lo, for v in [-87.6, 88.3] (callers clamp; there 2^n is a normal float) and
// |lo| <= 2^-20 |v|: 2^n (1 + r p(r)) with n = round(v / ln 2) and r = v - n ln 2 in [-ln2/2, ln2/2];
// p is a degree-5 least-squares fit of (e^r - 1) / r, good to 0.07 of 2^-24. Times 2^k, exactly, where
// that stays below 2^127: a caller scales a tiny e^v up to keep lo out of the (slow) subnormals.
ACCEL_HD_INLINE Float2 exp_split(float v, float lo, uint32_t k = 0) {
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float t = fmaf(v, 1.44269504f, round_magic);
  const float n = t - round_magic;
  // Cody-Waite: ln 2 = 0.693359375 (exact in 10 bits, so n * it is exact) - 2.12194440e-4.
  float r = fmaf(n, -0.693359375f, v);
  r = fmaf(n, 2.12194440e-4f, r) + lo;
  float p = 1.375138876e-03f;
  p = fmaf(p, r, 8.368921466e-03f);
  p = fmaf(p, r, 4.166953266e-02f);
  p = fmaf(p, r, 1.666651815e-01f);
  p = fmaf(p, r, 4.999998808e-01f);
  p = fmaf(p, r, 1.0f);
  const float y = fmaf(p, r, 1.0f);
  const float y_lo = fmaf(p, r, 1.0f - y);  // 1 - y is exact: y is in [0.7, 1.42]
  // 2^n, built in the exponent field from t's low bits (t's bits are the magic's plus n).
  const float scale = bits_float(0x3f800000u + ((float_bits(t) + k) << 23));
  return {y * scale, y_lo * scale};
}

// e^v for v in [-87.6, 88.3], within an ulp.
ACCEL_HD_INLINE float exp_f32(float v) {
  const Float2 e = exp_split(v, 0.0f);
  return e.hi;
}

}  // namespace accel
