// The 8-bit float storage types of FP8 training: Float8E4M3 (OCP E4M3FN: max 448, no inf, NaN 0x7f/0xff)
// and Float8E5M2 (IEEE-like: max 57344, inf, NaN). 8 bits in memory, float for arithmetic; shared by the
// CPU path and the CUDA kernels, so CPU tests pin the GPU's conversions.
//
// Encoding rounds to nearest even and saturates to the finite range, as NVIDIA's __NV_SATFINITE
// conversions do: a finite value beyond the largest one, and +-inf, become +-max; NaN stays NaN.
#pragma once

#include <cstdint>

#include "kernels/half.h"
#include "kernels/hd.h"

namespace accel {

// One FP8 format: exponent and mantissa widths, bias, and the largest finite code (sign bit clear).
template <int ExponentBits, int MantissaBits, int Bias, uint8_t MaxCode, bool HasInf>
struct Float8Format {
  static constexpr int kMantissaBits = MantissaBits;
  static constexpr int kBias = Bias;
  static constexpr uint8_t kMaxCode = MaxCode;
  static constexpr bool kHasInf = HasInf;
  static constexpr uint8_t kExponentMask = static_cast<uint8_t>((1 << ExponentBits) - 1);
};

using E4M3Format = Float8Format<4, 3, 7, 0x7e, false>;   // 0x7e = 1.75 * 2^8 = 448
using E5M2Format = Float8Format<5, 2, 15, 0x7b, true>;  // 0x7b = 1.75 * 2^15 = 57344

// |x| (its f32 bits, sign cleared, not NaN) as an FP8 magnitude code, rounded to nearest even.
template <class Format>
ACCEL_HD_INLINE uint8_t float8_magnitude_code(uint32_t magnitude) {
  constexpr int kShift = 23 - Format::kMantissaBits;  // f32 mantissa bits dropped from a normal value
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - Format::kBias) << 23;
  const int exponent = static_cast<int>(magnitude >> 23);
  if (magnitude >= kMinNormalBits) {
    // Round the f32 bits themselves: a carry out of the mantissa moves into the exponent, as it must.
    const uint32_t odd = (magnitude >> kShift) & 1u;
    const uint32_t rounded = (magnitude + (1u << (kShift - 1)) - 1u + odd) >> kShift;
    const uint32_t rebias = static_cast<uint32_t>(127 - Format::kBias) << Format::kMantissaBits;
    const uint32_t code = rounded - rebias;
    return code > Format::kMaxCode ? Format::kMaxCode : static_cast<uint8_t>(code);
  }
  // Subnormal FP8 (or zero): code = |x| / 2^(1 - bias - M), rounded to nearest even. f32 subnormals
  // lie far below half the smallest FP8 step and round to 0.
  if (exponent == 0) return 0;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = 127 + 23 + 1 - Format::kBias - Format::kMantissaBits - exponent;  // > kShift here
  if (shift >= 25) return 0;  // below half the smallest step: significand < 2^24 <= 2^(shift - 1)
  const uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const bool up = rest > half || (rest == half && (kept & 1u));
  return static_cast<uint8_t>(kept + (up ? 1u : 0u));  // kept + 1 == 2^M is the smallest normal: right
}

template <class Format>
ACCEL_HD_INLINE uint8_t float_to_float8_bits(float value) {
  const uint32_t f = float_bits(value);
  const uint8_t sign = static_cast<uint8_t>((f >> 24) & 0x80u);
  const uint32_t magnitude = f & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);  // NaN: 0x7f is NaN in both formats
  return static_cast<uint8_t>(sign | float8_magnitude_code<Format>(magnitude));
}

template <class Format>
ACCEL_HD_INLINE float float8_bits_to_float(uint8_t b) {
  constexpr int M = Format::kMantissaBits;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exponent = (b >> M) & Format::kExponentMask;
  const uint32_t mantissa = b & ((1u << M) - 1u);
  if (exponent == Format::kExponentMask) {
    if (Format::kHasInf) {  // E5M2: IEEE specials
      return bits_float(sign | (mantissa == 0 ? 0x7f800000u : 0x7fc00000u));
    }
    if (mantissa == (1u << M) - 1u) return bits_float(sign | 0x7fc00000u);  // E4M3FN: only S.1111.111
  }
  if (exponent == 0) {  // subnormal: mantissa * 2^(1 - bias - M), exact in f32
    const float step = bits_float(static_cast<uint32_t>(127 + 1 - Format::kBias - M) << 23);
    const float magnitude = static_cast<float>(mantissa) * step;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 127u - static_cast<uint32_t>(Format::kBias)) << 23) | (mantissa << (23 - M)));
}

template <class Format>
struct Float8 {
  using format = Format;
  uint8_t bits = 0;
  Float8() = default;
  ACCEL_HD Float8(float f) : bits(float_to_float8_bits<Format>(f)) {}
  ACCEL_HD operator float() const { return float8_bits_to_float<Format>(bits); }
  static ACCEL_HD Float8 from_bits(uint8_t b) {
    Float8 h;
    h.bits = b;
    return h;
  }
};

using Float8E4M3 = Float8<E4M3Format>;
using Float8E5M2 = Float8<E5M2Format>;

static_assert(sizeof(Float8E4M3) == 1 && sizeof(Float8E5M2) == 1, "fp8 types must be 8 bits");

// The largest finite value of each format: the fp8_max of delayed scaling.
inline constexpr float kFloat8E4M3Max = 448.0f;
inline constexpr float kFloat8E5M2Max = 57344.0f;

}  // namespace accel
