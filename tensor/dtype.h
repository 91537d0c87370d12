// The dtype names users write (CLI flags, config files) on top of kernels/dtype.h, which defines DType,
// its traits table and typed dispatch; code above the kernels includes this header for all of it.
#pragma once

#include <string>

#include "kernels/dtype.h"

namespace accel {

// Parses a short name (f64, f32, f16, bf16, i64, i32, bool) or a long one ("float32", "float16",
// "bfloat16", "half", "int64", ...); throws accel::Error naming the short names.
DType parse_dtype(const std::string& name);

}  // namespace accel
