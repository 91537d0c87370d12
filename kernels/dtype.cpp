// The dtype lookups over kDTypeTraits, and the error for a dtype an op does not support.
#include "kernels/dtype.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace accel {

const DTypeTraits& dtype_traits(DType dtype) {
  if (!is_known(dtype)) throw Error(fmt::format("dtype_traits: unknown dtype code {}", static_cast<int>(dtype)));
  return kDTypeTraits[static_cast<size_t>(dtype)];
}

size_t dtype_size(DType dtype) {
  if (!is_known(dtype)) throw Error(fmt::format("dtype_size: unknown dtype code {}", static_cast<int>(dtype)));
  return kDTypeTraits[static_cast<size_t>(dtype)].size;
}

const char* dtype_name(DType dtype) {
  return is_known(dtype) ? kDTypeTraits[static_cast<size_t>(dtype)].name : "unknown";
}

bool is_floating(DType dtype) { return is_known(dtype) && kDTypeTraits[static_cast<size_t>(dtype)].is_floating; }

bool is_integral(DType dtype) { return !is_floating(dtype); }

bool is_low_precision(DType dtype) {
  return is_known(dtype) && kDTypeTraits[static_cast<size_t>(dtype)].is_low_precision;
}

DType compute_dtype(DType dtype) { return dtype_traits(dtype).compute; }

void throw_unsupported_dtype(const char* op, DType dtype, const char* expected) {
  if (is_float8(dtype))
    throw Error(fmt::format("{}: unsupported dtype {}, expected {}; f8 tensors take only casts, copies and views "
                            "(cast to f32 or bf16 first)",
                            op, dtype_name(dtype), expected));
  throw Error(fmt::format("{}: unsupported dtype {}, expected {}", op, dtype_name(dtype), expected));
}

}  // namespace accel
