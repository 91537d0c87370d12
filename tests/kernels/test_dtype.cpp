// DType's numeric values are pinned (they travel between ranks and into files, so a reorder or a
// renumbering must fail here), and kDTypeTraits has one row per dtype, in enum order, that agrees with
// the C++ storage and compute types.
#include <doctest/doctest.h>

#include <cstring>

#include "kernels/dtype.h"
#include "kernels/error.h"

using namespace accel;

namespace {

struct Expected {
  DType dtype;
  int value;
  const char* name;
  size_t size;
  bool is_floating;
  bool is_low_precision;
  DType compute;
};

// Append only: a new dtype adds a row at the end; no existing row ever changes.
constexpr Expected kExpected[] = {
    {DType::f64, 0, "f64", 8, true, false, DType::f64},      {DType::f32, 1, "f32", 4, true, false, DType::f32},
    {DType::f16, 2, "f16", 2, true, true, DType::f32},       {DType::bf16, 3, "bf16", 2, true, true, DType::f32},
    {DType::i64, 4, "i64", 8, false, false, DType::i64},     {DType::i32, 5, "i32", 4, false, false, DType::i64},
    {DType::boolean, 6, "bool", 1, false, false, DType::i64},
    {DType::f8_e4m3, 7, "f8_e4m3", 1, true, false, DType::f32}, {DType::f8_e5m2, 8, "f8_e5m2", 1, true, false, DType::f32},
};

}  // namespace

TEST_CASE("DType values are fixed") {
  CHECK(static_cast<int>(DType::f64) == 0);
  CHECK(static_cast<int>(DType::f32) == 1);
  CHECK(static_cast<int>(DType::f16) == 2);
  CHECK(static_cast<int>(DType::bf16) == 3);
  CHECK(static_cast<int>(DType::i64) == 4);
  CHECK(static_cast<int>(DType::i32) == 5);
  CHECK(static_cast<int>(DType::boolean) == 6);
  CHECK(static_cast<int>(DType::f8_e4m3) == 7);
  CHECK(static_cast<int>(DType::f8_e5m2) == 8);
  CHECK(sizeof(DType) == 1);  // one byte wherever it is stored
}

TEST_CASE("kDTypeTraits has one row per dtype, in enum order, with its name, size and kind") {
  REQUIRE(kDTypeCount == std::size(kExpected));
  REQUIRE(kAllDTypes.size() == kDTypeCount);
  for (size_t i = 0; i < kDTypeCount; ++i) {
    const Expected& e = kExpected[i];
    const DTypeTraits& row = kDTypeTraits[i];
    INFO("row ", i, " (", e.name, ")");
    CHECK(static_cast<int>(row.dtype) == e.value);
    CHECK(row.dtype == e.dtype);
    CHECK(kAllDTypes[i] == e.dtype);
    CHECK(std::strcmp(row.name, e.name) == 0);
    CHECK(row.size == e.size);
    CHECK(row.is_floating == e.is_floating);
    CHECK(row.is_low_precision == e.is_low_precision);
    CHECK(row.compute == e.compute);
    // The lookups read the same row.
    CHECK(&dtype_traits(e.dtype) == &row);
    CHECK(std::strcmp(dtype_name(e.dtype), e.name) == 0);
    CHECK(dtype_size(e.dtype) == e.size);
    CHECK(is_floating(e.dtype) == e.is_floating);
    CHECK(is_integral(e.dtype) == !e.is_floating);
    CHECK(is_low_precision(e.dtype) == e.is_low_precision);
    CHECK(compute_dtype(e.dtype) == e.compute);
  }
}

TEST_CASE("kDTypeTraits agrees with the storage type, dtype_of and compute_t of each dtype") {
  for (const DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    dispatch_all(dtype, "test", [&]<class T>() {
      CHECK(sizeof(T) == dtype_size(dtype));
      CHECK(dtype_of<T>() == dtype);
      CHECK(dtype_of<compute_t<T>>() == compute_dtype(dtype));
    });
  }
}

TEST_CASE("a value no dtype has is named 'unknown' in messages and rejected by the lookups that need a row") {
  const DType bad = static_cast<DType>(kDTypeCount);
  CHECK_FALSE(is_known(bad));
  CHECK(std::strcmp(dtype_name(bad), "unknown") == 0);
  CHECK_FALSE(is_floating(bad));
  CHECK_FALSE(is_low_precision(bad));
  CHECK_THROWS_WITH_AS(dtype_size(bad), "dtype_size: unknown dtype code 9", Error);
  CHECK_THROWS_WITH_AS(dtype_traits(bad), "dtype_traits: unknown dtype code 9", Error);
  CHECK_THROWS_WITH_AS(compute_dtype(bad), "dtype_traits: unknown dtype code 9", Error);
}
