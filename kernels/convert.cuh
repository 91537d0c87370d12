// Device-side value conversion between storage types, the twin of tensor/cpu/convert.h: halves
// load to float and store rounding to nearest even; doubles go to halves without double rounding.
//
// The f32 <-> f16 and f32 -> bf16 steps use the hardware cvt.rn instructions. They round to nearest
// even exactly as kernels/half.h does for every non-NaN input (subnormals, overflow to inf and ties
// included); a NaN stays a NaN, but the hardware writes the canonical NaN (0x7fff) where half.h
// keeps the sign and payload. bf16 -> f32 is the same 16-bit shift as in half.h. The fp8 formats use
// kernels/float8.h's own conversions on the device too, so CPU and GPU casts agree bit for bit, and
// floats go to integers through kernels/float_to_int.h on both.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/float_to_int.h"

namespace accel::kernels {

template <class T>
inline constexpr bool is_half_v = is_narrow_float_v<T>;  // f16, bf16 and the fp8 formats

// The value of v in its compute type (float for halves, int64 for integers and bool).
template <class T>
__device__ __forceinline__ compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(__ushort_as_half(v.bits));
  else if constexpr (std::is_same_v<T, BFloat16>) return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
  else if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<compute_t<T>>(v);
}

// A compute value back into storage type T.
template <class T, class C>
__device__ __forceinline__ T store(C c) {
  if constexpr (std::is_same_v<T, Half>) return Half::from_bits(__half_as_ushort(__float2half_rn(static_cast<float>(c))));
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(c))));
  else if constexpr (is_half_v<T>) return T(static_cast<float>(c));
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_floating_point_v<C>)
    return float_to_int<T>(c);
  else return static_cast<T>(c);
}

// f64 -> f32 rounding to odd (truncate, then set the last bit when anything was cut off), so a
// second rounding to 16 bits equals rounding the f64 directly; as cpu::double_to_float_round_odd.
__device__ __forceinline__ float double_to_float_round_odd(double d) {
  float f = __double2float_rz(d);
  if (isfinite(d) && static_cast<double>(f) != d) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}

// As cpu::convert: the value of v as a To.
template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return load(v) != 0;
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) return store<To>(double_to_float_round_odd(v));
    else return store<To>(static_cast<float>(load(v)));
  } else {
    return store<To>(load(v));
  }
}

}  // namespace accel::kernels
