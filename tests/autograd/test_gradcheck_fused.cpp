// The fused differentiable ops (linear, causal_softmax) and relu against finite differences in f64, and
// leaf accumulation, which keeps a fresh grad's buffer but copies any grad that is shared.
#include <doctest/doctest.h>

#include "accel.h"
#include "autograd/node.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

Tensor input(const Shape& shape, uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  return randn(shape, gen, DType::f64).requires_grad_(requires_grad);
}

void check(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

}  // namespace

TEST_CASE("gradcheck: linear w.r.t. x, weight and bias, for 1-d, 2-d, 3-d and strided x") {
  const Tensor w = input({4, 3}, 1), b = input({4}, 2);
  for (const Shape& shape : {Shape{3}, Shape{5, 3}, Shape{2, 5, 3}}) {
    INFO(shape_str(shape));
    check([](const auto& in) { return linear(in[0], in[1], in[2]); }, {input(shape, 3), w, b});
    check([](const auto& in) { return linear(in[0], in[1], Tensor()); }, {input(shape, 4), w});
  }
  // A transposed x (copied to fold its rows) and a transposed weight (read in place).
  check([](const auto& in) { return linear(transpose(in[0], 0, 1), transpose(in[1], 0, 1), in[2]); },
        {input({3, 5}, 5), input({3, 4}, 6), b});
  // Only some inputs need grads: the others get none and cost nothing.
  const Tensor x = input({5, 3}, 7), w_fixed = input({4, 3}, 8, false);
  check([&](const auto& in) { return linear(in[0], w_fixed, in[1]); }, {x, b});
}

TEST_CASE("linear records LinearBackward and grads only the inputs that require them") {
  Tensor x = input({2, 3}, 9, false), w = input({4, 3}, 10), b = input({4}, 11, false);
  Tensor y = linear(x, w, b);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "LinearBackward");
  backward(sum(y));
  CHECK(w.grad().defined());
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(b.grad().defined());
  // d sum(x w^T) / dw[o, k] = sum over rows of x[:, k].
  const auto xs = nograd::sum(x, {0}).to_vector<double>();
  const auto gw = w.grad().to_vector<double>();
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t k = 0; k < 3; ++k) CHECK(gw[o * 3 + k] == doctest::Approx(xs[k]));
}

TEST_CASE("gradcheck: relu away from its kink, and causal_softmax for square and rectangular scores") {
  // Inputs kept away from 0, where relu has no derivative for finite differences to find.
  const Tensor raw = input({4, 5}, 12, false);
  Tensor away = nograd::where(nograd::lt(nograd::abs(raw), 0.1), nograd::add(raw, 0.5), raw);
  away.requires_grad_();
  check([](const auto& in) { return relu(in[0]) * in[0]; }, {away});
  for (const Shape& shape : {Shape{4, 4}, Shape{2, 3, 5}, Shape{2, 2, 3, 3}}) {
    INFO(shape_str(shape));
    check([](const auto& in) { return causal_softmax(in[0], 0.7); }, {input(shape, 13)});
  }
  check([](const auto& in) { return causal_softmax(transpose(in[0], 1, 2), -1.5); }, {input({2, 4, 4}, 14)});
  CHECK(causal_softmax(input({3, 3}, 15), 1.0).grad_fn()->name() == "CausalSoftmaxBackward");
}

TEST_CASE("a leaf grad never shares its buffer with a tensor that anything else can reach") {
  // Fresh: the grad of w in linear is a new GEMM result that nothing else holds.
  Tensor w = input({3, 2}, 16);
  backward(sum(linear(input({4, 2}, 17, false), w, Tensor())));
  CHECK(w.grad().defined());
  CHECK(w.grad().is_contiguous());

  // A root that is itself the leaf: its grad is the caller's tensor, which must not become the leaf's.
  Tensor leaf = input({3}, 18);
  Tensor seed = from_vector<double>({1, 2, 3});
  backward(leaf, seed);
  CHECK(leaf.grad().data_ptr() != seed.data_ptr());
  nograd::fill_(seed, 7.0);
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{1, 2, 3});

  // One grad tensor handed to two leaves (add passes it through unchanged): each gets its own buffer.
  Tensor a = input({2}, 19), b = input({2}, 20);
  backward(a + b, from_vector<double>({1, 1}));
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().data_ptr() != b.grad().data_ptr());
  nograd::fill_(a.grad(), 5.0);
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 1});

  // A strided grad (the transpose of a matmul's) is made contiguous.
  Tensor m = input({2, 3}, 21);
  backward(sum(matmul(input({4, 3}, 22, false), transpose(m, 0, 1))));
  CHECK(m.grad().is_contiguous());
  CHECK(m.grad().shape() == Shape{2, 3});
}
