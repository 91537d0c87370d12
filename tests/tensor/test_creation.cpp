// Creation, casts between every dtype pair, and the Philox generator's reproducibility.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/reduce.h"

using namespace accel;

TEST_CASE("zeros, ones, full, arange, from_vector") {
  CHECK(zeros({2, 2}).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(ones({3}, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1});
  CHECK(full({2}, 2.5, DType::f64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, DType::f32).to_vector<float>() == std::vector<float>{1, 1.25, 1.5, 1.75});
  CHECK(scalar_tensor(3.0).dim() == 0);
  CHECK_THROWS_WITH_AS(from_vector<float>({1, 2, 3}, {2, 2}), "from_vector: 3 values do not fill shape [2, 2] (4 elements)", Error);
  CHECK_THROWS_WITH_AS(empty({2, -1}), "empty: negative size in shape [2, -1]", Error);
  CHECK_THROWS_WITH_AS(zeros({2}).data<double>(), "Tensor::data: tensor holds f32, but f64 was requested", Error);
}

TEST_CASE("casts between every pair of dtypes keep small integers") {
  Tensor src = from_vector<double>({0, 1, 2, 3}, {4});
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      Tensor round_trip = nograd::to_dtype(nograd::to_dtype(nograd::to_dtype(src, a), b), DType::f64);
      const bool through_bool = a == DType::boolean || b == DType::boolean;
      const std::vector<double> expected = through_bool ? std::vector<double>{0, 1, 1, 1} : std::vector<double>{0, 1, 2, 3};
      CHECK_MESSAGE(round_trip.to_vector<double>() == expected, dtype_name(a), " -> ", dtype_name(b));
    }
  }
}

TEST_CASE("float to integer casts go toward zero, saturate at the integer's range, and take NaN to 0") {
  // C++ leaves these undefined and x86 gives the integer minimum for all of them; accel defines
  // them as CUDA's cvt.rzi does, so the CPU and the GPU agree (tests/gpu/test_copy.cpp).
  const double inf = INFINITY, nan = NAN, two31 = 2147483648.0, two63 = 9223372036854775808.0;
  constexpr int32_t i32_max = std::numeric_limits<int32_t>::max(), i32_min = std::numeric_limits<int32_t>::min();
  constexpr int64_t i64_max = std::numeric_limits<int64_t>::max(), i64_min = std::numeric_limits<int64_t>::min();
  const std::vector<double> in{nan, -nan, inf, -inf, 1e300, -1e300, two31, -two31, two31 - 1, -two31 - 1,
                               two63, -two63, 2.9, -2.9, -0.5, -0.0, 2147483520.0, 9223371487098961920.0};
  const std::vector<int32_t> want32{0, 0, i32_max, i32_min, i32_max, i32_min, i32_max, i32_min, i32_max, i32_min,
                                    i32_max, i32_min, 2, -2, 0, 0, 2147483520, i32_max};
  constexpr int64_t p31 = int64_t{1} << 31;
  const std::vector<int64_t> want64{0, 0, i64_max, i64_min, i64_max, i64_min, p31, -p31, p31 - 1, -p31 - 1,
                                    i64_max, i64_min, 2, -2, 0, 0, 2147483520, 9223371487098961920};
  // two31 - 1 and -two31 - 1 are exact in f64 only; f32 rounds them to +-2^31, which saturates the
  // same way in i32 and is exact in i64.
  const std::vector<int64_t> want64_f32{0, 0, i64_max, i64_min, i64_max, i64_min, p31, -p31, p31, -p31,
                                        i64_max, i64_min, 2, -2, 0, 0, 2147483520, 9223371487098961920};
  const Tensor f64 = from_vector<double>(in);
  CHECK(nograd::to_dtype(f64, DType::i32).to_vector<int32_t>() == want32);
  CHECK(nograd::to_dtype(f64, DType::i64).to_vector<int64_t>() == want64);
  const Tensor f32 = nograd::to_dtype(f64, DType::f32);
  CHECK(nograd::to_dtype(f32, DType::i32).to_vector<int32_t>() == want32);
  CHECK(nograd::to_dtype(f32, DType::i64).to_vector<int64_t>() == want64_f32);
  // The halves load as f32. (A cast into fp8 saturates inf to the finite range, so fp8 holds no inf
  // to try here.)
  for (DType narrow : {DType::f16, DType::bf16}) {
    const std::string name = dtype_name(narrow);
    INFO(name);
    const Tensor t = nograd::to_dtype(from_vector<double>({nan, inf, -inf, -2.5}), narrow);
    CHECK(nograd::to_dtype(t, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{0, i32_max, i32_min, -2});
  }
  const Tensor bf16 = nograd::to_dtype(from_vector<double>({3.0e38}), DType::bf16);  // beyond i64 too
  CHECK(nograd::to_dtype(bf16, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{i64_max});
  // A fill converts its value the same way.
  CHECK(full({2}, 1e10, DType::i32).to_vector<int32_t>() == std::vector<int32_t>{i32_max, i32_max});
  CHECK(full({1}, nan, DType::i64).to_vector<int64_t>() == std::vector<int64_t>{0});
}

TEST_CASE("f32 to f16 and bf16 tensor casts round to nearest even") {
  Tensor t = from_vector<float>({1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11)});
  auto h = nograd::to_dtype(t, DType::f16).to_vector<Half>();
  CHECK(h[0].bits == 0x3c00);
  CHECK(h[1].bits == 0x3c02);
}

TEST_CASE("generator: same seed same stream, state save and restore") {
  Generator a(7), b(7);
  CHECK(randn({100}, a).to_vector<float>() == randn({100}, b).to_vector<float>());
  const GeneratorState saved = a.state();
  auto first = rand({33}, a).to_vector<float>();
  a.set_state(saved);
  CHECK(rand({33}, a).to_vector<float>() == first);
  Generator c(8);
  CHECK(randn({100}, c).to_vector<float>() != randn({100}, b).to_vector<float>());
}

TEST_CASE("randn has mean 0 and variance 1; rand lies in [0, 1)") {
  Generator gen(123);
  auto n = randn({100000}, gen, DType::f64).to_vector<double>();
  double mean = 0, var = 0;
  for (double v : n) mean += v;
  mean /= n.size();
  for (double v : n) var += (v - mean) * (v - mean);
  var /= n.size();
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(var - 1.0) < 0.02);
  for (float v : rand({10000}, gen).to_vector<float>()) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
  }
  CHECK_THROWS_WITH_AS(randn({2}, gen, DType::i64), "randn: random draws need a floating dtype, got i64", Error);
}
