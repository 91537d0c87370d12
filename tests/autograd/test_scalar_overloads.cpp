// The user's op set through accel.h alone: the scalar forms of the binary functions, and clone and
// to_dtype under their names, each recording the graph.
#include <doctest/doctest.h>

#include "accel.h"
#include "autograd/node.h"

using namespace accel;

namespace {

Tensor leaf(std::vector<double> values) { return from_vector(values).requires_grad_(); }

std::vector<double> grad_of(const Tensor& x) { return x.grad().to_vector<double>(); }

}  // namespace

TEST_CASE("add, sub, mul, div, pow, maximum and minimum take a scalar and record the graph") {
  Tensor x = leaf({-1.0, 0.5, 2.0});
  const Tensor added = add(x, 1.0), subtracted = sub(x, 1.0), scaled = mul(x, 2.0), divided = div(x, 4.0);
  CHECK(added.to_vector<double>() == std::vector<double>{0.0, 1.5, 3.0});
  CHECK(subtracted.to_vector<double>() == std::vector<double>{-2.0, -0.5, 1.0});
  CHECK(scaled.to_vector<double>() == std::vector<double>{-2.0, 1.0, 4.0});
  CHECK(divided.to_vector<double>() == std::vector<double>{-0.25, 0.125, 0.5});
  CHECK(added.grad_fn()->name() == "AddBackward");
  CHECK(subtracted.grad_fn()->name() == "SubBackward");
  CHECK(scaled.grad_fn()->name() == "MulBackward");
  CHECK(divided.grad_fn()->name() == "DivBackward");
  CHECK(pow(x, 2.0).grad_fn()->name() == "PowScalarBackward");

  backward(sum(mul(x, 2.0)));
  CHECK(grad_of(x) == std::vector<double>{2, 2, 2});
  x.set_grad(Tensor());
  backward(sum(add(div(x, 4.0), sub(x, 3.0))));
  CHECK(grad_of(x) == std::vector<double>{1.25, 1.25, 1.25});

  // A tie with the scalar shares the grad, as it does between two tensors.
  Tensor y = leaf({-1.0, 0.0, 2.0});
  const Tensor relu_like = maximum(y, 0.0);
  CHECK(relu_like.to_vector<double>() == std::vector<double>{0.0, 0.0, 2.0});
  CHECK(relu_like.grad_fn()->name() == "MaximumBackward");
  backward(sum(relu_like));
  CHECK(grad_of(y) == std::vector<double>{0.0, 0.5, 1.0});
  y.set_grad(Tensor());
  backward(sum(minimum(y, 0.0)));
  CHECK(grad_of(y) == std::vector<double>{1.0, 0.5, 0.0});
}

TEST_CASE("scalar forms keep the tensor's dtype and equal the operators bit for bit") {
  Generator gen(3);
  const Tensor h = to(randn({17}, gen), DType::f16);
  CHECK(mul(h, 0.1).dtype() == DType::f16);
  CHECK(maximum(h, 0.25).dtype() == DType::f16);
  const Tensor f = randn({33}, gen);
  CHECK(mul(f, 0.1).to_vector<float>() == (f * 0.1).to_vector<float>());
  CHECK(add(f, 0.3).to_vector<float>() == (f + 0.3).to_vector<float>());
  CHECK(sub(f, 0.3).to_vector<float>() == (f - 0.3).to_vector<float>());
  CHECK(div(f, 0.7).to_vector<float>() == (f / 0.7).to_vector<float>());
}

TEST_CASE("gradcheck: the scalar forms") {
  Generator gen(5);
  Tensor a = randn({3, 4}, gen, DType::f64).requires_grad_();
  for (const auto& f : std::vector<std::function<Tensor(const std::vector<Tensor>&)>>{
           [](const auto& x) { return add(x[0], 1.5); }, [](const auto& x) { return sub(x[0], -2.0); },
           [](const auto& x) { return mul(x[0], 3.0); }, [](const auto& x) { return div(x[0], -0.5); },
           [](const auto& x) { return maximum(x[0], 0.1); }, [](const auto& x) { return minimum(x[0], -0.2); }}) {
    const GradcheckResult r = gradcheck(f, {a});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("clone and to_dtype are in accel.h and differentiable") {
  Tensor x = leaf({1.0, -2.0, 4.0});
  const Tensor copy = clone(x);
  CHECK_FALSE(copy.is_same(x));
  CHECK(copy.grad_fn()->name() == "CloneBackward");
  const Tensor narrow_copy = to_dtype(x, DType::f32);
  CHECK(narrow_copy.dtype() == DType::f32);
  CHECK(narrow_copy.grad_fn()->name() == "ToDTypeBackward");
  CHECK(to_dtype(x, DType::f64).is_same(x));  // already f64: the same tensor, as to() gives
  backward(sum(mul(to_dtype(x, DType::f32), 3.0)));
  backward(sum(clone(x)));  // accumulates into the same grad
  CHECK(x.grad().dtype() == DType::f64);
  CHECK(grad_of(x) == std::vector<double>{4, 4, 4});
}
