// Elementwise ops: broadcasting, strided inputs, each dtype, comparisons, where, and error messages.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

using namespace accel;

TEST_CASE("binary ops broadcast and read strided inputs") {
  Tensor a = nograd::reshape(arange(0.0, 6.0, 1.0, DType::f32), {2, 3});
  Tensor b = from_vector<float>({10, 20, 30});
  CHECK(nograd::add(a, b).to_vector<float>() == std::vector<float>{10, 21, 32, 13, 24, 35});
  Tensor col = from_vector<float>({1, 2}, {2, 1});
  CHECK(nograd::mul(a, col).to_vector<float>() == std::vector<float>{0, 1, 2, 6, 8, 10});
  Tensor at = nograd::transpose(a, 0, 1);  // [3, 2], strided
  CHECK(nograd::sub(at, 1.0).to_vector<float>() == std::vector<float>{-1, 2, 0, 3, 1, 4});
  CHECK(nograd::div(a, 2.0).to_vector<float>()[5] == 2.5f);
  CHECK(nograd::pow(a, 2.0).to_vector<float>()[4] == 16.0f);
  CHECK(nograd::maximum(a, b).to_vector<float>() == std::vector<float>{10, 20, 30, 10, 20, 30});
}

TEST_CASE("large inputs take the threaded path and agree with a scalar loop") {
  const int64_t n = 200003;
  Generator gen(1);
  Tensor a = randn({n}, gen), b = randn({n}, gen);
  auto s = nograd::add(nograd::mul(a, b), a).to_vector<float>();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  for (int64_t i = 0; i < n; i += 997) CHECK(s[i] == doctest::Approx(av[i] * bv[i] + av[i]).epsilon(1e-6));
}

TEST_CASE("halves compute in f32 and round once") {
  Tensor a = nograd::to_dtype(from_vector<float>({1.0f, 2048.0f}), DType::f16);
  Tensor b = nograd::to_dtype(from_vector<float>({std::ldexp(1.0f, -11), 1.0f}), DType::f16);
  auto sum = nograd::add(a, b).to_vector<Half>();
  CHECK(sum[0].bits == 0x3c00);                     // 1 + 2^-11 ties to even: 1
  CHECK(static_cast<float>(sum[1]) == 2048.0f);      // 2049 is not representable: ties to even 2048
  Tensor bf = nograd::to_dtype(from_vector<float>({1.5f}), DType::bf16);
  CHECK(static_cast<float>(nograd::mul(bf, bf).to_vector<BFloat16>()[0]) == 2.25f);
}

TEST_CASE("unary math matches std") {
  Tensor x = from_vector<double>({-1.5, -0.1, 0.0, 0.7, 2.0});
  auto xv = x.to_vector<double>();
  auto check = [&](Tensor y, auto f) {
    auto yv = y.to_vector<double>();
    for (size_t i = 0; i < xv.size(); ++i) CHECK(yv[i] == doctest::Approx(f(xv[i])).epsilon(1e-12));
  };
  check(nograd::neg(x), [](double v) { return -v; });
  check(nograd::exp(x), [](double v) { return std::exp(v); });
  check(nograd::abs(x), [](double v) { return std::abs(v); });
  check(nograd::tanh(x), [](double v) { return std::tanh(v); });
  check(nograd::sigmoid(x), [](double v) { return 1 / (1 + std::exp(-v)); });
  check(nograd::relu(x), [](double v) { return v > 0 ? v : 0; });
  check(nograd::gelu(x), [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); });
  Tensor pos = from_vector<double>({0.5, 1.0, 4.0});
  CHECK(nograd::log(pos).to_vector<double>()[2] == doctest::Approx(std::log(4.0)));
  CHECK(nograd::sqrt(pos).to_vector<double>()[2] == 2.0);
}

TEST_CASE("comparisons, where and masked_fill") {
  Tensor a = from_vector<float>({1, 2, 3, 4});
  CHECK(nograd::gt(a, 2.0).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK(nograd::eq(a, from_vector<float>({1, 0, 3, 0})).to_vector<bool>() == std::vector<bool>{true, false, true, false});
  CHECK(nograd::where(nograd::le(a, 2.0), a, nograd::neg(a)).to_vector<float>() == std::vector<float>{1, 2, -3, -4});
  CHECK(nograd::masked_fill(a, nograd::ne(a, 3.0), 0.0).to_vector<float>() == std::vector<float>{0, 0, 3, 0});
  CHECK(nograd::logical_not(nograd::lt(a, 3.0)).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  Tensor inf = from_vector<float>({1.0f, INFINITY, NAN});
  CHECK(nograd::isfinite(inf).to_vector<bool>() == std::vector<bool>{true, false, false});
}

TEST_CASE("in-place updates") {
  Tensor a = from_vector<float>({1, 2, 3});
  nograd::add_(a, from_vector<float>({1, 1, 1}), 2.0);
  CHECK(a.to_vector<float>() == std::vector<float>{3, 4, 5});
  nograd::mul_(a, 0.5);
  CHECK(a.to_vector<float>() == std::vector<float>{1.5, 2, 2.5});
  nograd::zero_(a);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 0, 0});
}

TEST_CASE("elementwise errors name the op and the values") {
  Tensor f = zeros({2, 3});
  CHECK_THROWS_WITH_AS(nograd::add(f, zeros({4})), "add: shapes [2, 3] and [4] cannot broadcast (dim 1: 3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(nograd::mul(f, zeros({2, 3}, DType::f16)), "mul: dtypes differ: f32 [2, 3] vs f16 [2, 3]; cast one with to_dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::exp(zeros({2}, DType::i64)), "exp: unsupported dtype i64, expected a floating dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::div(zeros({2}, DType::i32), zeros({2}, DType::i32)), "div: unsupported dtype i32, expected a floating dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::where(f, f, f), "where: condition must be bool, got f32 [2, 3]", Error);
  CHECK_THROWS_WITH_AS(nograd::masked_fill(f, zeros({3, 3}, DType::boolean), 0), doctest::Contains("masked_fill"), Error);
  CHECK_THROWS_WITH_AS(nograd::add_(zeros({3}), f), "add_: [2, 3] does not broadcast to the destination [3]", Error);
  CHECK_THROWS_WITH_AS(nograd::add(Tensor(), f), "add: got an undefined tensor", Error);
}
