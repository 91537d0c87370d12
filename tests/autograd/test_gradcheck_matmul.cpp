// matmul's backward against finite differences in f64: 2-d, transposed, batched, broadcast and
// 1-d operands; and grads computed only for the inputs that require them.
#include <doctest/doctest.h>

#include "accel.h"
#include "autograd/node.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

Tensor input(const Shape& shape, uint64_t seed, bool requires_grad = true) {
  Generator gen(seed);
  return randn(shape, gen, DType::f64).requires_grad_(requires_grad);
}

void check_matmul(const Shape& a, const Shape& b) {
  INFO(shape_str(a) << " x " << shape_str(b));
  const GradcheckResult r = gradcheck([](const auto& x) { return matmul(x[0], x[1]); }, {input(a, 1), input(b, 2)});
  CHECK_MESSAGE(r.ok, r.message);
}

}  // namespace

TEST_CASE("gradcheck: 2-d matmul") {
  check_matmul({3, 4}, {4, 5});
  check_matmul({1, 1}, {1, 1});
  check_matmul({7, 3}, {3, 1});
  Tensor x = input({3, 4}, 3), w = input({5, 4}, 4);
  const GradcheckResult r = gradcheck([](const auto& t) { return matmul(t[0], transpose(t[1], 0, 1)); }, {x, w});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("gradcheck: batched and broadcast matmul") {
  check_matmul({2, 3, 4}, {2, 4, 5});
  check_matmul({2, 3, 4}, {4, 5});        // a weight shared by the batch
  check_matmul({2, 2, 3, 4}, {4, 5});
  check_matmul({3, 4}, {2, 4, 5});        // a matrix shared by the batch
  check_matmul({2, 1, 3, 4}, {3, 4, 2});  // both broadcast: batch [2, 3]
  check_matmul({1, 3, 4}, {2, 4, 2});
}

TEST_CASE("gradcheck: 1-d matmul") {
  check_matmul({4}, {4, 5});
  check_matmul({3, 4}, {4});
  check_matmul({4}, {4});
  check_matmul({2, 3, 4}, {4});
  check_matmul({4}, {2, 4, 5});
}

TEST_CASE("matmul backward computes grads only for inputs that require them") {
  Tensor a = input({3, 4}, 5), b = input({4, 2}, 6, false);
  Tensor out = matmul(a, b);
  REQUIRE(out.grad_fn());
  CHECK(out.grad_fn()->name() == "MatmulBackward");
  const std::vector<Tensor> grads = out.grad_fn()->apply({ones({3, 2}, DType::f64)});
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].shape() == Shape{3, 4});
  CHECK_FALSE(grads[1].defined());

  Tensor c = input({4}, 7, false), d = input({2, 4, 3}, 8);
  const std::vector<Tensor> grads2 = matmul(c, d).grad_fn()->apply({ones({2, 3}, DType::f64)});
  CHECK_FALSE(grads2[0].defined());
  CHECK(grads2[1].shape() == Shape{2, 4, 3});

  // backward fills the leaf's grad: d(sum(a @ b))/da = ones @ b^T.
  backward(sum(out));
  CHECK(a.grad().to_vector<double>() == nograd::matmul(ones({3, 2}, DType::f64), nograd::transpose(b, 0, 1)).to_vector<double>());
  CHECK_FALSE(b.grad().defined());
}
