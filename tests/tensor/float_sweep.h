// Float inputs for bit-for-bit checks of a vector kernel against its scalar function: the floats a
// few ulps around chosen points, the specials, a sweep of bit patterns, and a mismatch count.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace accel::test {

// Each point and its negation, and the floats 1-3 ulps either side of both; then inf, -inf and NaNs.
inline std::vector<float> around_points(const std::vector<float>& points) {
  std::vector<float> out;
  for (float e : points) {
    uint32_t b;
    std::memcpy(&b, &e, sizeof b);
    for (int d = -3; d <= 3; ++d) {
      const uint32_t nb = b + static_cast<uint32_t>(d);
      float f;
      std::memcpy(&f, &nb, sizeof f);
      out.push_back(f);
      out.push_back(-f);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {inf, -inf, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::signaling_NaN()})
    out.push_back(s);
  return out;
}

// Every 61st float bit pattern (both signs, denormals, inf and NaN among them): about 70 million.
inline std::vector<float> bit_pattern_sweep() {
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 61) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, sizeof f);
    xs.push_back(f);
  }
  return xs;
}

inline bool same_bits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);  // NaN payloads are not kept
  uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  return ua == ub;
}

// How many got[i] differ in bits from scalar(xs[i]); first is the first such x. Pass scalar as a lambda:
// the activation functions are always_inline, which GCC cannot do through a function pointer (the
// sanitizer build at -O1 refuses to compile it).
template <class F>
size_t count_mismatches(const std::vector<float>& xs, const std::vector<float>& got, F scalar, float& first) {
  size_t bad = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!same_bits(got[i], scalar(xs[i])) && bad++ == 0) first = xs[i];
  return bad;
}

}  // namespace accel::test
