// Half (IEEE binary16) and BFloat16 storage types: 16 bits in memory, float for arithmetic,
// round-to-nearest-even on conversion. Shared by the CPU path and the CUDA kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace accel {

ACCEL_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

ACCEL_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// After F. Giesen's float_to_half_fast3_rtne: exact round-to-nearest-even, NaN stays NaN.
ACCEL_HD uint16_t float_to_half_bits(float value) {
  uint32_t f = float_bits(value);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t out;
  if (f >= (127u + 16u) << 23) {  // too large for half: inf, or NaN kept quiet
    out = f > (255u << 23) ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {  // half subnormal or zero: let float addition round for us
    const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    const float sum = bits_float(f) + bits_float(denorm_magic);
    out = static_cast<uint16_t>(float_bits(sum) - denorm_magic);
  } else {
    const uint32_t mantissa_odd = (f >> 13) & 1u;
    f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    f += mantissa_odd;
    out = static_cast<uint16_t>(f >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

ACCEL_HD float half_bits_to_float(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {  // inf or NaN
    o += (128u - 16u) << 23;
  } else if (exp == 0) {  // zero or subnormal: renormalise through float subtraction
    o += 1u << 23;
    o = float_bits(bits_float(o) - bits_float(113u << 23));
  }
  o |= (static_cast<uint32_t>(h) & 0x8000u) << 16;
  return bits_float(o);
}

ACCEL_HD uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t f = float_bits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding_bias = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding_bias) >> 16);
}

ACCEL_HD float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

struct Half {
  uint16_t bits = 0;
  Half() = default;
  ACCEL_HD Half(float f) : bits(float_to_half_bits(f)) {}
  ACCEL_HD operator float() const { return half_bits_to_float(bits); }
  static ACCEL_HD Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  ACCEL_HD BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  ACCEL_HD operator float() const { return bfloat16_bits_to_float(bits); }
  static ACCEL_HD BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "half types must be 16 bits");

}  // namespace accel
