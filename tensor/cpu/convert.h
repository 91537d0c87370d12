// Value conversion between storage types on the CPU, rounding to nearest even into f16/bf16/f8
// (from f64 without double rounding; f8 saturates to its finite range), and from floats to integers
// toward zero, saturating, NaN to 0 (kernels/float_to_int.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/float_to_int.h"
#include "tensor/dtype.h"

namespace accel::cpu {

template <class T>
inline constexpr bool is_half_v = is_narrow_float_v<T>;  // f16, bf16 and the fp8 formats

// f64 -> f32 rounding to odd: the f32 keeps a sticky bit, so a second rounding to 16 bits
// (to 16 or 8 bits) gives the same result as rounding the f64 directly.
inline float double_to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || std::isinf(d)) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  if (static_cast<double>(f) != d) f = bits_float(float_bits(f) | 1u);
  return f;
}

template <class C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// The value of v in its compute type (float for halves, int64 for integers and bool).
template <class T>
inline compute_t<T> load(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<compute_t<T>>(v);
}

// Converts a compute value back to the storage type T (rounding to nearest even for halves; a float
// into an integer as convert does).
template <class T, class C>
inline T store(C c) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(c));
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_floating_point_v<C>)
    return float_to_int<T>(c);
  else return static_cast<T>(c);
}

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return load(v) != 0;
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) return To(double_to_float_round_odd(v));
    else return To(static_cast<float>(load(v)));
  } else {
    return store<To>(load(v));
  }
}

}  // namespace accel::cpu
