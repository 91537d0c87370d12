// DType: the element types a tensor can hold, their sizes and names, and typed dispatch helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tensor/half.h"

namespace accel {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, boolean };

inline constexpr DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                                       DType::i64, DType::i32, DType::boolean};

size_t dtype_size(DType dtype);
// Short names used in messages and in the CLI: f64, f32, f16, bf16, i64, i32, bool.
const char* dtype_name(DType dtype);
// Parses a short name (also "float32", "float16", "bfloat16", "int64", ...); throws accel::Error.
DType parse_dtype(const std::string& name);
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // i64, i32 and bool

// The C++ type stored for each dtype.
template <DType D> struct StorageType;
template <> struct StorageType<DType::f64> { using type = double; };
template <> struct StorageType<DType::f32> { using type = float; };
template <> struct StorageType<DType::f16> { using type = Half; };
template <> struct StorageType<DType::bf16> { using type = BFloat16; };
template <> struct StorageType<DType::i64> { using type = int64_t; };
template <> struct StorageType<DType::i32> { using type = int32_t; };
template <> struct StorageType<DType::boolean> { using type = bool; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// The type arithmetic happens in: halves compute in float, integers in int64.
template <class T>
using compute_t = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, float>,
                       float, int64_t>>;

[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype, const char* expected);

// Calls f.template operator()<T>() with T the storage type of dtype.
template <class F>
decltype(auto) dispatch_all(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f64: return f.template operator()<double>();
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<Half>();
    case DType::bf16: return f.template operator()<BFloat16>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::boolean: return f.template operator()<bool>();
  }
  throw_unsupported_dtype(op, dtype, "a known dtype");
}

// Floating dtypes only (f64, f32, f16, bf16).
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f64: return f.template operator()<double>();
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<Half>();
    case DType::bf16: return f.template operator()<BFloat16>();
    default: throw_unsupported_dtype(op, dtype, "a floating dtype (f64, f32, f16, bf16)");
  }
}

// Numeric dtypes (everything but bool).
template <class F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f64: return f.template operator()<double>();
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<Half>();
    case DType::bf16: return f.template operator()<BFloat16>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::i32: return f.template operator()<int32_t>();
    default: throw_unsupported_dtype(op, dtype, "a numeric dtype (not bool)");
  }
}

}  // namespace accel
