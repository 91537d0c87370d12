// Creation, casts between every dtype pair, and the Philox generator's reproducibility.
#include <doctest/doctest.h>

#include <cmath>

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
