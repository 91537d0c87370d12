// Double-float arithmetic: a value carried as an unevaluated sum hi + lo of two floats, about 44
// significant bits, built from error-free products (fma) and sums. The f32 activations use it where
// a rounded f32 intermediate would cost more than an ulp of the result (kernels/activation_math.h).
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace accel {

struct Float2 {
  float hi, lo;  // |lo| <= ulp(hi) / 2, or an unnormalised correction of about that size
};

// a * b exactly: the rounded product and its rounding error.
ACCEL_HD_INLINE Float2 two_prod(float a, float b) {
  const float p = a * b;
  return {p, fmaf(a, b, -p)};
}

// a + b exactly, for any order of magnitude (Knuth's TwoSum).
ACCEL_HD_INLINE Float2 two_sum(float a, float b) {
  const float s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

// x * (a + b * x^2) to about 2^-44 relative, with a = a.hi + a.lo and b = b.hi + b.lo, for |x| up to
// about 1e12 (beyond that x^3 overflows).
ACCEL_HD_INLINE Float2 odd_cubic(float x, Float2 a, Float2 b) {
  const Float2 x2 = two_prod(x, x);
  Float2 p = two_prod(b.hi, x2.hi);
  p.lo = fmaf(b.lo, x2.hi, fmaf(b.hi, x2.lo, p.lo));
  Float2 s = two_sum(a.hi, p.hi);
  s.lo += a.lo + p.lo;
  Float2 u = two_prod(x, s.hi);
  u.lo = fmaf(x, s.lo, u.lo);
  return u;
}

// A double constant split into hi + lo floats.
constexpr Float2 split_constant(double v) {
  const float hi = static_cast<float>(v);
  return {hi, static_cast<float>(v - static_cast<double>(hi))};
}

}  // namespace accel
