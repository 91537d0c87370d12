// What bench/op_accuracy reports and the activation accuracy tests assert on: f32 inputs dense near 0
// and out to |x| = 20 (past where tanh saturates and GELU underflows), f64 references of tanh, GELU
// (tanh form) and their derivatives computed here, and the two error measures: ulps of the f64 result
// (forward) and relative error floored at 1e-3 of the largest magnitude (backward).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace accel::test {

// Every `stride`-th float from 0 to 20 by bit pattern (so dense near 0, about 1e6 / stride of
// them), both signs, plus a uniform grid of step 1e-3 on [-20, 20].
inline std::vector<float> activation_sweep(uint32_t stride = 997) {
  std::vector<float> xs;
  uint32_t top;
  const float twenty = 20.0f;
  std::memcpy(&top, &twenty, sizeof top);
  for (uint32_t bits = 0; bits <= top; bits += stride) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    xs.push_back(x);
    xs.push_back(-x);
  }
  for (int i = -20000; i <= 20000; ++i) xs.push_back(static_cast<float>(i) * 1e-3f);
  return xs;
}

constexpr double kSqrt2OverPi = 0.7978845608028654, kGeluCubic = 0.044715;

inline double gelu_u(double x) { return kSqrt2OverPi * (x + kGeluCubic * x * x * x); }
// 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), the second form free of cancellation for x < 0.
inline double ref_gelu(double x) { return x / (1 + std::exp(-2 * gelu_u(x))); }
inline double ref_gelu_grad(double x) {
  const double s = 1 / (1 + std::exp(-2 * gelu_u(x)));  // sigma(2u) = (1 + tanh u) / 2
  return s + x * s * (1 - s) * 2 * kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x);
}
inline double ref_tanh(double x) { return std::tanh(x); }
inline double ref_tanh_grad(double x) {
  const double c = std::cosh(x);
  return 1 / (c * c);
}

// The spacing of floats at |r| (subnormal spacing below the normal range).
inline double f32_ulp(double r) {
  r = std::fabs(r);
  if (r < static_cast<double>(std::numeric_limits<float>::min())) return std::ldexp(1.0, -149);
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 24);
}

struct WorstError {
  double error = 0;  // in the measure's units
  double x = 0;      // where it is
};

// Largest |got - ref| in ulps of ref, over refs of magnitude at least min_ref.
template <class Ref>
WorstError max_ulp_error(const std::vector<float>& xs, const std::vector<float>& got, Ref ref, double min_ref = 0) {
  WorstError w;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ref(static_cast<double>(xs[i]));
    if (std::fabs(r) < min_ref) continue;
    const double e = std::fabs(static_cast<double>(got[i]) - r) / f32_ulp(r);
    if (!(e <= w.error)) w = {e, static_cast<double>(xs[i])};  // NaN counts as the worst
  }
  return w;
}

// Largest |got - ref| / max(|ref|, 1e-3 max |ref|).
template <class Ref>
WorstError max_floored_relative_error(const std::vector<float>& xs, const std::vector<float>& got, Ref ref) {
  double largest = 0;
  for (float x : xs) largest = std::max(largest, std::fabs(ref(static_cast<double>(x))));
  WorstError w;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ref(static_cast<double>(xs[i]));
    const double e = std::fabs(static_cast<double>(got[i]) - r) / std::max(std::fabs(r), 1e-3 * largest);
    if (!(e <= w.error)) w = {e, static_cast<double>(xs[i])};
  }
  return w;
}

}  // namespace accel::test
