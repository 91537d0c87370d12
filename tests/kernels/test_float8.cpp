// The fp8 formats of kernels/float8.h, exhaustively: every bit pattern of E4M3FN and E5M2 against a
// table built here from the format definitions, every halfway case between neighbours, saturation and NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/float8.h"

using namespace accel;

namespace {

struct FormatSpec {
  const char* name;
  int exponent_bits, mantissa_bits, bias;
  bool ieee_specials;  // E5M2: exponent all ones is inf (mantissa 0) or NaN; E4M3FN: only S.1111.111 is NaN
};

constexpr FormatSpec kE4M3{"e4m3", 4, 3, 7, false};
constexpr FormatSpec kE5M2{"e5m2", 5, 2, 15, true};

// The value of bit pattern b by the format's definition, in double: (-1)^s 2^(e - bias) (1 + m / 2^M)
// for normals, 2^(1 - bias) (m / 2^M) for subnormals.
double reference_value(const FormatSpec& f, unsigned b) {
  const unsigned s = b >> 7, e = (b >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1u);
  const unsigned m = b & ((1u << f.mantissa_bits) - 1u);
  const unsigned e_max = (1u << f.exponent_bits) - 1u, m_max = (1u << f.mantissa_bits) - 1u;
  const double sign = s ? -1.0 : 1.0;
  if (f.ieee_specials && e == e_max)
    return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (!f.ieee_specials && e == e_max && m == m_max) return std::numeric_limits<double>::quiet_NaN();
  const double fraction = static_cast<double>(m) / static_cast<double>(1u << f.mantissa_bits);
  if (e == 0) return sign * std::ldexp(fraction, 1 - f.bias);
  return sign * std::ldexp(1.0 + fraction, static_cast<int>(e) - f.bias);
}

template <class F8>
float decode(unsigned b) {
  return static_cast<float>(F8::from_bits(static_cast<uint8_t>(b)));
}
template <class F8>
unsigned encode(float x) {
  return F8(x).bits;
}

// The finite non-negative codes in increasing order of value (codes 0 .. max code are monotonic).
template <class F8>
std::vector<unsigned> positive_finite_codes() {
  std::vector<unsigned> codes;
  for (unsigned b = 0; b <= F8::format::kMaxCode; ++b) codes.push_back(b);
  return codes;
}

template <class F8>
void check_every_pattern(const FormatSpec& spec) {
  int nans = 0, infs = 0;
  for (unsigned b = 0; b < 256; ++b) {
    INFO(spec.name, " pattern ", b);
    const double want = reference_value(spec, b);
    const float got = decode<F8>(b);
    if (std::isnan(want)) {
      ++nans;
      CHECK(std::isnan(got));
      CHECK(std::isnan(decode<F8>(encode<F8>(got))));
      continue;
    }
    if (std::isinf(want)) ++infs;
    CHECK(static_cast<double>(got) == want);
    CHECK(std::signbit(got) == ((b & 0x80u) != 0));
    // Every finite pattern encodes back to itself (-0 included); inf saturates to the largest finite.
    if (!std::isinf(want)) CHECK(encode<F8>(got) == b);
    else CHECK(encode<F8>(got) == ((b & 0x80u) | F8::format::kMaxCode));
  }
  if (spec.ieee_specials) {
    CHECK(nans == 6);  // 0x7d..0x7f and 0xfd..0xff
    CHECK(infs == 2);
  } else {
    CHECK(nans == 2);  // 0x7f and 0xff
    CHECK(infs == 0);
  }
}

// Each midpoint between neighbouring finite values rounds to the neighbour with an even code; one f32
// step either side of it rounds to the nearer neighbour. Both signs.
template <class F8>
void check_halfway_cases(const char* name) {
  const std::vector<unsigned> codes = positive_finite_codes<F8>();
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    const unsigned lo = codes[i], hi = codes[i + 1];
    const float a = decode<F8>(lo), b = decode<F8>(hi);
    const float mid = (a + b) / 2;  // exact: an fp8 midpoint has at most 5 significant bits
    INFO(name, " between codes ", lo, " and ", hi);
    REQUIRE(static_cast<double>(mid) == (static_cast<double>(a) + static_cast<double>(b)) / 2);
    const unsigned even = (lo % 2 == 0) ? lo : hi;
    CHECK(encode<F8>(mid) == even);
    CHECK(encode<F8>(-mid) == (0x80u | even));
    CHECK(encode<F8>(std::nextafter(mid, 0.0f)) == lo);
    CHECK(encode<F8>(std::nextafter(mid, 1e30f)) == hi);
    CHECK(encode<F8>(-std::nextafter(mid, 1e30f)) == (0x80u | hi));
  }
}

template <class F8>
void check_saturation_and_nan(float max) {
  const unsigned max_code = F8::format::kMaxCode;
  CHECK(decode<F8>(max_code) == max);
  for (const float big : {max, std::nextafter(max, 1e30f), max * 1.0625f, max * 2.0f, 1e30f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()}) {
    INFO(big);
    CHECK(encode<F8>(big) == max_code);
    CHECK(encode<F8>(-big) == (0x80u | max_code));
  }
  for (const float nan : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::signaling_NaN()}) {
    const unsigned b = encode<F8>(nan);
    CHECK((b & 0x7fu) == 0x7fu);
    CHECK(std::isnan(decode<F8>(b)));
  }
  // Below the smallest subnormal: half of it is a tie with 0 (even), anything more rounds up to it;
  // f32 subnormals are 0.
  const float tiny = decode<F8>(1);
  CHECK(encode<F8>(tiny / 2) == 0u);
  CHECK(encode<F8>(-tiny / 2) == 0x80u);
  CHECK(encode<F8>(std::nextafter(tiny / 2, 1.0f)) == 1u);
  CHECK(encode<F8>(tiny * 1.5f) == 2u);  // tie between codes 1 and 2: 2 is even
  CHECK(encode<F8>(std::numeric_limits<float>::denorm_min()) == 0u);
}

}  // namespace

TEST_CASE("e4m3: all 256 patterns decode to the format's values and encode back") {
  check_every_pattern<Float8E4M3>(kE4M3);
}
TEST_CASE("e5m2: all 256 patterns decode to the format's values and encode back") {
  check_every_pattern<Float8E5M2>(kE5M2);
}

TEST_CASE("e4m3 and e5m2: every f32 halfway case between neighbours rounds to even") {
  check_halfway_cases<Float8E4M3>("e4m3");
  check_halfway_cases<Float8E5M2>("e5m2");
}

TEST_CASE("e4m3 and e5m2: out-of-range values saturate to +-max, NaN stays NaN, tiny values round to 0") {
  check_saturation_and_nan<Float8E4M3>(kFloat8E4M3Max);
  check_saturation_and_nan<Float8E5M2>(kFloat8E5M2Max);
  CHECK(kFloat8E4M3Max == 448.0f);
  CHECK(kFloat8E5M2Max == 57344.0f);
  // A few landmarks by hand: 1.0, the smallest normal and subnormal, and the value just under max.
  CHECK(encode<Float8E4M3>(1.0f) == 0x38u);
  CHECK(encode<Float8E5M2>(1.0f) == 0x3cu);
  CHECK(decode<Float8E4M3>(0x08) == std::ldexp(1.0f, -6));
  CHECK(decode<Float8E4M3>(0x01) == std::ldexp(1.0f, -9));
  CHECK(decode<Float8E5M2>(0x04) == std::ldexp(1.0f, -14));
  CHECK(decode<Float8E5M2>(0x01) == std::ldexp(1.0f, -16));
  CHECK(decode<Float8E4M3>(0x7d) == 416.0f);
  CHECK(decode<Float8E5M2>(0x7c) == std::numeric_limits<float>::infinity());
}
