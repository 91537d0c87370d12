// Names, sizes and parsing of dtypes.
#include "tensor/dtype.h"

#include <fmt/format.h>

#include "tensor/error.h"

namespace accel {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::boolean: return 1;
  }
  throw Error(fmt::format("dtype_size: unknown dtype code {}", static_cast<int>(dtype)));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::boolean: return "bool";
  }
  return "unknown";
}

DType parse_dtype(const std::string& name) {
  if (name == "f64" || name == "float64" || name == "double") return DType::f64;
  if (name == "f32" || name == "float32" || name == "float") return DType::f32;
  if (name == "f16" || name == "float16" || name == "half" || name == "fp16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i64" || name == "int64") return DType::i64;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "bool") return DType::boolean;
  throw Error(fmt::format("parse_dtype: unknown dtype '{}', expected one of f64, f32, f16, bf16, i64, i32, bool",
                          name));
}

bool is_floating(DType dtype) {
  return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

bool is_integral(DType dtype) { return !is_floating(dtype); }

void throw_unsupported_dtype(const char* op, DType dtype, const char* expected) {
  throw Error(fmt::format("{}: unsupported dtype {}, expected {}", op, dtype_name(dtype), expected));
}

}  // namespace accel
