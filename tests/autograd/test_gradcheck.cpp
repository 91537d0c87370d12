// Every differentiable op of autograd/functions.h against finite differences in f64.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"

using namespace accel;

namespace {

Tensor input(const Shape& shape, uint64_t seed, double shift = 0.0) {
  Generator gen(seed);
  return (randn(shape, gen, DType::f64) + shift).requires_grad_();
}

void check(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

}  // namespace

TEST_CASE("gradcheck: broadcasting arithmetic") {
  Tensor a = input({3, 4}, 1), b = input({4}, 2), c = input({3, 1}, 3, 3.0);
  check([](const auto& x) { return x[0] + x[1]; }, {a, b});
  check([](const auto& x) { return x[0] - x[1]; }, {a, c});
  check([](const auto& x) { return x[0] * x[1]; }, {a, b});
  check([](const auto& x) { return x[0] / x[1]; }, {a, c});
  check([](const auto& x) { return pow(x[1], x[0]); }, {a, c});
  check([](const auto& x) { return pow(x[0], 3.0); }, {a});
  check([](const auto& x) { return 2.0 - x[0] * 3.0 + 1.0 / x[1]; }, {a, c});
  check([](const auto& x) { return maximum(x[0], x[1]); }, {a, b});
  check([](const auto& x) { return minimum(x[0], x[1]); }, {a, b});
}

TEST_CASE("gradcheck: pow at zero and at negative bases, wherever the finite difference is defined") {
  const auto leaf = [](std::vector<double> v) { return from_vector(v).requires_grad_(); };
  const auto constant = [](std::vector<double> v) { return from_vector(v); };
  // Bases at 0 and below 0 with integer exponents; only the base varies (log of a negative is NaN).
  const Tensor bases = leaf({0.0, -2.0, -1.5, -0.5, 0.0, 1.25});
  for (double e : {0.0, 1.0, 2.0, 3.0, -1.0, -2.0}) {
    INFO("scalar exponent ", e);
    const Tensor x = e < 0 ? leaf({-2.0, -1.5, -0.5, 0.75}) : bases;  // x^-k has no limit at 0
    check([e](const auto& in) { return pow(in[0], e); }, {x});
    check([e](const auto& in) { return pow(in[0], full(in[0].shape(), e, DType::f64)); }, {x});
  }
  // A zero base under positive exponents: 0^b is 0 on both sides of b, so d/db is 0.
  check([](const auto& in) { return pow(in[0], in[1]); }, {constant({0.0, 0.0, 0.0, 0.0}), leaf({0.5, 1.0, 2.0, 3.0})});
  // Both vary, away from a = 0 where d/db has no two-sided limit at b <= 0.
  check([](const auto& in) { return pow(in[0], in[1]); }, {leaf({0.0, 0.0, 1.5, 2.0}), leaf({1.0, 2.0, 0.0, -1.0})});
}

TEST_CASE("gradcheck: unary math") {
  Tensor a = input({2, 5}, 4), p = input({2, 5}, 5, 4.0);
  check([](const auto& x) { return -x[0]; }, {a});
  check([](const auto& x) { return exp(x[0]); }, {a});
  check([](const auto& x) { return log(x[0]); }, {p});
  check([](const auto& x) { return sqrt(x[0]); }, {p});
  check([](const auto& x) { return abs(x[0]); }, {a});
  check([](const auto& x) { return tanh(x[0]); }, {a});
  check([](const auto& x) { return sigmoid(x[0]); }, {a});
  check([](const auto& x) { return relu(x[0]); }, {a});
  check([](const auto& x) { return gelu(x[0]); }, {a});
}

TEST_CASE("gradcheck: where and masked_fill") {
  Tensor a = input({3, 4}, 6), b = input({4}, 7);
  check([](const auto& x) { return where(gt(x[0], 0.0), x[0], x[1]); }, {a, b});
  check([](const auto& x) { return masked_fill(x[0], lt(x[0], 0.0), -5.0); }, {a});
}

TEST_CASE("gradcheck: views") {
  Tensor a = input({2, 3, 4}, 8);
  check([](const auto& x) { return reshape(x[0], {6, 4}); }, {a});
  check([](const auto& x) { return view(x[0], {4, -1}); }, {a});
  check([](const auto& x) { return transpose(x[0], 0, 2) * 1.5; }, {a});
  check([](const auto& x) { return permute(x[0], {1, 2, 0}); }, {a});
  check([](const auto& x) { return narrow(x[0], 1, 1, 2); }, {a});
  // Zeros on one side only, from a negative start, and the whole dim (no zeros).
  check([](const auto& x) { return narrow(x[0], 2, 0, 3); }, {a});
  check([](const auto& x) { return narrow(x[0], -1, -2, 2); }, {a});
  check([](const auto& x) { return narrow(x[0], 0, 0, 2) * 2.0; }, {a});
  check([](const auto& x) { return slice(x[0], 2, 0, 4, 3); }, {a});
  check([](const auto& x) { return select(x[0], 2, 1); }, {a});
  check([](const auto& x) { return expand(unsqueeze(x[0], 0), {3, 2, 3, 4}); }, {a});
  check([](const auto& x) { return squeeze(narrow(x[0], 0, 1, 1), 0); }, {a});
  check([](const auto& x) { return flatten(x[0], 1); }, {a});
  check([](const auto& x) { return contiguous(transpose(x[0], 0, 1)); }, {a});
  check([](const auto& x) { auto p = split(x[0], 2, 2); return p[1] * p[0]; }, {a});
  check([](const auto& x) { auto p = split(x[0], std::vector<int64_t>{1, 2}, 1); return sum(p[1], {1}); }, {a});
}

TEST_CASE("gradcheck: copies and joins") {
  Tensor a = input({2, 3}, 9), b = input({2, 3}, 10);
  check([](const auto& x) { return cat({x[0], x[1] * 2.0}, 1); }, {a, b});
  check([](const auto& x) { return stack({x[0], x[1]}, 1); }, {a, b});
  check([](const auto& x) { return clone(x[0]); }, {a});
  check([](const auto& x) { return index_select(x[0], 1, from_vector<int64_t>({2, 0, 2})); }, {a});
}

TEST_CASE("gradcheck: reductions") {
  Tensor a = input({3, 4, 2}, 11);
  check([](const auto& x) { return sum(x[0]); }, {a});
  check([](const auto& x) { return sum(x[0], {1}, true); }, {a});
  check([](const auto& x) { return sum(x[0], {0, 2}); }, {a});
  check([](const auto& x) { return mean(x[0], {-1}); }, {a});
  check([](const auto& x) { return mean(x[0]); }, {a});
  check([](const auto& x) { return max(x[0], {1}); }, {a});
  check([](const auto& x) { return max(x[0], {0, 2}, true); }, {a});
}

TEST_CASE("max shares the grad between ties") {
  Tensor x = from_vector<double>({1, 3, 3}).requires_grad_();
  backward(max(x));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5});
}

TEST_CASE("reductions: values, keepdim, dtypes and errors") {
  Tensor t = reshape(arange(0.0, 6.0, 1.0, DType::f32), {2, 3});
  CHECK(sum(t, {1}).to_vector<float>() == std::vector<float>{3, 12});
  CHECK(sum(t, {0}, true).shape() == Shape{1, 3});
  CHECK(mean(t).item() == 2.5);
  CHECK(max(t, {0}).to_vector<float>() == std::vector<float>{3, 4, 5});
  CHECK(argmax(t, 1).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  CHECK(argmax(from_vector<float>({1, 5, 5}), 0).item() == 1);  // the first maximum
  CHECK(sum(ones({4}, DType::boolean)).dtype() == DType::i64);
  CHECK_THROWS_WITH_AS(sum(t, {2}), "sum: dim 2 out of range for a tensor of rank 2 (expected -2..1)", Error);
  CHECK_THROWS_WITH_AS(sum(t, {1, 1}), "sum: dim 1 appears twice in [1, 1]", Error);
  CHECK_THROWS_WITH_AS(mean(ones({2}, DType::i32)), "mean: unsupported dtype i32, expected a floating dtype", Error);
  CHECK_THROWS_WITH_AS(max(zeros({2, 0}), {1}), "max: cannot take the max over an empty dim of [2, 0]", Error);
}

TEST_CASE("gradcheck: min over dims, and the values of max and min over one dim") {
  Tensor a = input({3, 4, 2}, 12);
  check([](const auto& x) { return min(x[0]); }, {a});
  check([](const auto& x) { return min(x[0], {1}); }, {a});
  check([](const auto& x) { return min(x[0], {0, 2}, true); }, {a});
  check([](const auto& x) { return max(x[0], 1).values; }, {a});
  check([](const auto& x) { return min(x[0], -1, true).values; }, {a});
}

TEST_CASE("max and min over one dim return values and indices; min and argmin mirror max and argmax") {
  const Tensor t = from_vector<float>({4, -1, 7, 2, 9, -3}, {2, 3});
  const auto [top, where_top] = max(t, 1);
  CHECK(top.to_vector<float>() == std::vector<float>{7, 9});
  CHECK(where_top.dtype() == DType::i64);
  CHECK(where_top.to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  const auto [low, where_low] = min(t, 0, true);
  CHECK(low.shape() == Shape{1, 3});
  CHECK(where_low.shape() == Shape{1, 3});
  CHECK(low.to_vector<float>() == std::vector<float>{2, -1, -3});
  CHECK(where_low.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(min(t).item() == -3.0);
  CHECK(min(t, {1}).to_vector<float>() == std::vector<float>{-1, -3});
  CHECK(argmin(t, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(argmin(from_vector<float>({5, 1, 1}), 0).item() == 1);  // the first minimum
  // A braced single dim still names the dims-list reduction, which returns values only.
  CHECK(max(t, {1}).to_vector<float>() == std::vector<float>{7, 9});
  // Integers, bool, NaN (which wins, as in max) and a strided input.
  CHECK(min(from_vector<int64_t>({3, -9, 4})).item() == -9);
  CHECK(min(from_vector<int32_t>({2, 7, 1, 8}, {2, 2}), {0}).to_vector<int32_t>() == std::vector<int32_t>{1, 7});
  CHECK(min(from_vector<bool>({true, false, true})).item() == 0);
  CHECK(std::isnan(min(from_vector<float>({1, NAN, -5})).item()));
  CHECK(argmin(from_vector<float>({1, NAN, -5, NAN}), 0).item() == 1);
  CHECK(min(transpose(t, 0, 1), {1}).to_vector<float>() == std::vector<float>{2, -1, -3});
  CHECK_THROWS_WITH_AS(min(zeros({2, 0}), {1}), "min: cannot take the min over an empty dim of [2, 0]", Error);
  CHECK_THROWS_WITH_AS(argmin(zeros({0}), 0), "argmin: dim 0 of [0] is empty", Error);
  CHECK_THROWS_WITH_AS(max(t, 2), "max: dim 2 out of range for a tensor of rank 2 (expected -2..1)", Error);
}

// A documented difference from PyTorch: torch.max(x, 1) and torch.min(x, 1) give the whole grad to the
// index they return ([0, 1, 0] for the row [1, 3, 3]); accel shares it between the tied elements, as
// torch.amax and a full torch.max() do, so the grad does not depend on which tie the index names.
TEST_CASE("max and min over a dim split the grad evenly between ties, unlike PyTorch's max(dim)") {
  Tensor x = from_vector<double>({1, 3, 3, 2, -1, 2}, {2, 3}).requires_grad_();
  backward(sum(max(x, 1).values));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0.5, 0, 0.5});
  CHECK(max(x, 1).indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // the first tie, as PyTorch's
  Tensor y = from_vector<double>({1, 1, 3, 2, -1, -1}, {2, 3}).requires_grad_();
  backward(sum(min(y, 1).values));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0.5, 0.5, 0, 0, 0.5, 0.5});
  CHECK_FALSE(max(x, 1).indices.requires_grad());
}
