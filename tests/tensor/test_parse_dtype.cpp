// parse_dtype reads every short name of kDTypeTraits and the long spellings users write, and names the
// short names when it rejects one.
#include <doctest/doctest.h>

#include "kernels/error.h"
#include "tensor/dtype.h"

using namespace accel;

TEST_CASE("parse_dtype: each short name gives its dtype") {
  for (const DType dtype : kAllDTypes) CHECK(parse_dtype(dtype_name(dtype)) == dtype);
}

TEST_CASE("parse_dtype: the long spellings") {
  CHECK(parse_dtype("float64") == DType::f64);
  CHECK(parse_dtype("double") == DType::f64);
  CHECK(parse_dtype("float32") == DType::f32);
  CHECK(parse_dtype("float") == DType::f32);
  CHECK(parse_dtype("float16") == DType::f16);
  CHECK(parse_dtype("half") == DType::f16);
  CHECK(parse_dtype("fp16") == DType::f16);
  CHECK(parse_dtype("bfloat16") == DType::bf16);
  CHECK(parse_dtype("int64") == DType::i64);
  CHECK(parse_dtype("int32") == DType::i32);
}

TEST_CASE("parse_dtype: an unknown name throws, naming the short names") {
  CHECK_THROWS_WITH_AS(parse_dtype("f8"),
                       "parse_dtype: unknown dtype 'f8', expected one of f64, f32, f16, bf16, i64, i32, bool, f8_e4m3, f8_e5m2", Error);
  CHECK_THROWS_AS(parse_dtype("F32"), Error);  // names are case-sensitive
  CHECK_THROWS_AS(parse_dtype(""), Error);
}
