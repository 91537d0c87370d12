// parse_dtype: the short names come from kDTypeTraits, the long spellings users also write from kAliases.
#include "tensor/dtype.h"

#include <fmt/format.h>

#include <string_view>

#include "kernels/error.h"

namespace accel {

namespace {

struct DTypeAlias {
  std::string_view name;
  DType dtype;
};

constexpr DTypeAlias kAliases[] = {
    {"float64", DType::f64}, {"double", DType::f64}, {"float32", DType::f32}, {"float", DType::f32},
    {"float16", DType::f16}, {"half", DType::f16},   {"fp16", DType::f16},    {"bfloat16", DType::bf16},
    {"int64", DType::i64},   {"int32", DType::i32},
};

}  // namespace

DType parse_dtype(const std::string& name) {
  for (const DTypeTraits& t : kDTypeTraits)
    if (name == t.name) return t.dtype;
  for (const DTypeAlias& a : kAliases)
    if (name == a.name) return a.dtype;
  std::string names;
  for (const DTypeTraits& t : kDTypeTraits) names += fmt::format("{}{}", names.empty() ? "" : ", ", t.name);
  throw Error(fmt::format("parse_dtype: unknown dtype '{}', expected one of {}", name, names));
}

}  // namespace accel
