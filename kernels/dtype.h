// DType, the element types a tensor can hold, and kDTypeTraits, the one table of their properties;
// with the C++ type stored for each dtype, the type it computes in, and typed dispatch.
// It lives at the lowest floor because the CUDA kernels dispatch on dtypes too. tensor/dtype.h adds the
// names users type (parse_dtype); backend type maps (MPI, NCCL, cuBLAS, safetensors) stay in their
// backend files as tables keyed by DType that draw sizes and kinds from kDTypeTraits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/float8.h"
#include "kernels/half.h"

namespace accel {

// The numeric values are fixed and only ever appended to, as in ggml.h: they travel between ranks
// (the Accelerator's gather exchanges them) and may be written into files. Never reorder, renumber or reuse one; a
// new dtype takes the next number and a new last row of kDTypeTraits. tests/kernels/test_dtype.cpp pins them.
enum class DType : uint8_t {
  f64 = 0,
  f32 = 1,
  f16 = 2,
  bf16 = 3,
  i64 = 4,
  i32 = 5,
  boolean = 6,
  f8_e4m3 = 7,
  f8_e5m2 = 8,
};

struct DTypeTraits {
  DType dtype;
  const char* name;       // the short name of messages and the CLI
  uint8_t size;           // bytes per element
  bool is_floating;
  bool is_low_precision;  // stored in 16 bits and computed in f32 (f16, bf16); f8 is not: it only stores
  DType compute;          // the dtype its arithmetic happens in: compute_t below, as a DType
};

// One row per dtype, in enum order: kDTypeTraits[value] describes that value.
inline constexpr DTypeTraits kDTypeTraits[] = {
    {DType::f64, "f64", 8, true, false, DType::f64},
    {DType::f32, "f32", 4, true, false, DType::f32},
    {DType::f16, "f16", 2, true, true, DType::f32},
    {DType::bf16, "bf16", 2, true, true, DType::f32},
    {DType::i64, "i64", 8, false, false, DType::i64},
    {DType::i32, "i32", 4, false, false, DType::i64},
    {DType::boolean, "bool", 1, false, false, DType::i64},
    {DType::f8_e4m3, "f8_e4m3", 1, true, false, DType::f32},
    {DType::f8_e5m2, "f8_e5m2", 1, true, false, DType::f32},
};
inline constexpr size_t kDTypeCount = sizeof(kDTypeTraits) / sizeof(kDTypeTraits[0]);

// True when rows[i].dtype is DType value i for every dtype: a table keyed by DType (this one, or a
// backend's) can then be indexed by the value. Used in static_asserts next to such tables.
template <class Row, size_t N>
constexpr bool rows_in_dtype_order(const Row (&rows)[N]) {
  if (N != kDTypeCount) return false;
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(rows[i].dtype) != i) return false;
  return true;
}
static_assert(rows_in_dtype_order(kDTypeTraits), "kDTypeTraits needs one row per DType, in enum order");

inline constexpr std::array<DType, kDTypeCount> kAllDTypes = [] {
  std::array<DType, kDTypeCount> all{};
  for (size_t i = 0; i < kDTypeCount; ++i) all[i] = kDTypeTraits[i].dtype;
  return all;
}();

// False for a value no row describes (a corrupt byte from a file or another rank).
constexpr bool is_known(DType dtype) { return static_cast<size_t>(dtype) < kDTypeCount; }

// The lookups below read kDTypeTraits; an unknown value throws accel::Error naming it, except where noted.
const DTypeTraits& dtype_traits(DType dtype);
size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "unknown" for an unknown value, so that messages can name it
bool is_floating(DType dtype);        // f64, f32, f16, bf16, f8_e4m3, f8_e5m2; false for an unknown value
bool is_integral(DType dtype);        // i64, i32 and bool: !is_floating
bool is_low_precision(DType dtype);   // f16 and bf16; false for an unknown value
DType compute_dtype(DType dtype);     // f64 for f64, f32 for f32/f16/bf16/f8, i64 for the integral dtypes
// f8_e4m3 and f8_e5m2: storage-only dtypes. Casts (copy_, to_dtype), views, fill_, item, printing,
// comparisons and the collectives that move data take them; arithmetic and reductions do not.
constexpr bool is_float8(DType dtype) { return dtype == DType::f8_e4m3 || dtype == DType::f8_e5m2; }

// The C++ type stored for each dtype.
template <DType D> struct StorageType;
template <> struct StorageType<DType::f64> { using type = double; };
template <> struct StorageType<DType::f32> { using type = float; };
template <> struct StorageType<DType::f16> { using type = Half; };
template <> struct StorageType<DType::bf16> { using type = BFloat16; };
template <> struct StorageType<DType::i64> { using type = int64_t; };
template <> struct StorageType<DType::i32> { using type = int32_t; };
template <> struct StorageType<DType::boolean> { using type = bool; };
template <> struct StorageType<DType::f8_e4m3> { using type = Float8E4M3; };
template <> struct StorageType<DType::f8_e5m2> { using type = Float8E5M2; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }
template <> constexpr DType dtype_of<Float8E4M3>() { return DType::f8_e4m3; }
template <> constexpr DType dtype_of<Float8E5M2>() { return DType::f8_e5m2; }

// Floats stored narrower than they compute: 16-bit halves and the 8-bit fp8 formats, all in float.
template <class T>
inline constexpr bool is_narrow_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                                          std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>;

// The type arithmetic happens in: halves and fp8 compute in float, integers in int64.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double,
                                     std::conditional_t<is_narrow_float_v<T> || std::is_same_v<T, float>, float, int64_t>>;

[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype, const char* expected);

// The switches below call a template per type; the properties of a dtype are looked up in kDTypeTraits.

// Calls f.template operator()<T>() with T the storage type of dtype: every dtype, f8 included, so only
// storage-level code (copies, fill, item, print, comparisons) dispatches through it.
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
    case DType::f8_e4m3: return f.template operator()<Float8E4M3>();
    case DType::f8_e5m2: return f.template operator()<Float8E5M2>();
  }
  throw_unsupported_dtype(op, dtype, "a known dtype");
}

// Floating dtypes that compute (f64, f32, f16, bf16); f8 throws, naming the op.
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

// Numeric dtypes that compute (everything but bool and f8).
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
