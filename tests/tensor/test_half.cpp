// f16/bf16 conversions: exact round-to-nearest-even, specials, and f64 without double rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "accel.h"
#include "tensor/cpu/convert.h"

using namespace accel;

TEST_CASE("half: exactly representable values round-trip") {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /* min normal */, 5.960464477539063e-08f})
    CHECK(static_cast<float>(Half(v)) == v);
}

TEST_CASE("half: ties round to even") {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10; even mantissa is 1.0.
  CHECK(Half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  CHECK(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);
  // just above the tie rounds up
  CHECK(Half(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)).bits == 0x3c01);
}

TEST_CASE("half: overflow, infinity, NaN and subnormals") {
  CHECK(Half(65520.0f).bits == 0x7c00);  // the tie above the max rounds to inf
  CHECK(Half(65519.0f).bits == 0x7bff);
  CHECK(Half(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  CHECK(Half(-std::numeric_limits<float>::infinity()).bits == 0xfc00);
  CHECK(std::isnan(static_cast<float>(Half(std::nanf("")))));
  CHECK(Half(std::ldexp(1.0f, -25)).bits == 0x0000);   // half of the smallest subnormal: tie to even 0
  CHECK(Half(std::ldexp(1.5f, -25)).bits == 0x0001);   // above the tie
  CHECK(static_cast<float>(Half::from_bits(0x0001)) == std::ldexp(1.0f, -24));
}

TEST_CASE("bfloat16: round to nearest even and NaN") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(bits_float(0x3f808000u)).bits == 0x3f80);  // tie, even stays
  CHECK(BFloat16(bits_float(0x3f818000u)).bits == 0x3f82);  // tie, odd rounds up
  CHECK(BFloat16(bits_float(0x3f808001u)).bits == 0x3f81);
  CHECK(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
  CHECK(BFloat16(std::numeric_limits<float>::infinity()).bits == 0x7f80);
}

TEST_CASE("f64 to f16 rounds once") {
  // 1 + 2^-11 + 2^-40 is just above the f16 tie; rounding through f32 (RNE) would land exactly on the
  // tie and go down to 1.0. Direct rounding goes up.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(cpu::convert<Half>(v).bits == 0x3c01);
  CHECK(Half(static_cast<float>(v)).bits == 0x3c00);  // the double-rounding result it avoids
}
