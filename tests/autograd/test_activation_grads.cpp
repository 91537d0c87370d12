// tanh and gelu grads near saturation: in f64 against finite differences (gradcheck), and in f32
// through autograd against the f64 derivative computed here, within 1e-5 relative (floored at 1e-3
// of the largest). tanh's grad is taken from its input, not as 1 - y^2 from its rounded output.
#include <doctest/doctest.h>

#include <vector>

#include "accel.h"
#include "bench/activation_reference.h"

using namespace accel;
using namespace accel::test;

namespace {

// Inputs from the linear part out to where tanh saturates and gelu underflows.
std::vector<double> saturating_inputs() {
  std::vector<double> xs;
  for (double a : {0.3, 1.0, 2.0, 3.0, 4.0, 5.0, 6.5, 8.0, 9.0}) {
    xs.push_back(a);
    xs.push_back(-a);
  }
  return xs;
}

// x.grad of sum(f(x) * g) for f32 x, as f32.
std::vector<float> f32_grad(Tensor (*f)(const Tensor&), const std::vector<float>& xs, const std::vector<float>& g) {
  Tensor x = from_vector<float>(xs).requires_grad_();
  backward(sum(f(x) * from_vector<float>(g)));
  return x.grad().to_vector<float>();
}

}  // namespace

TEST_CASE("gradcheck: tanh and gelu near saturation (f64)") {
  const Tensor x = from_vector<double>(saturating_inputs()).requires_grad_();
  for (auto f : {+[](const Tensor& t) { return tanh(t); }, +[](const Tensor& t) { return gelu(t); }}) {
    const GradcheckResult r = gradcheck([f](const auto& in) { return f(in[0]); }, {x});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("f32 tanh and gelu grads near saturation are within 1e-5 of the f64 derivative") {
  std::vector<float> xs;
  for (int i = -12000; i <= 12000; ++i) xs.push_back(static_cast<float>(i) * 1e-3f);
  std::vector<float> g(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) g[i] = i % 2 ? 0.5f : -2.0f;  // exact in f32: the product rounds once
  const auto grad_tanh = f32_grad([](const Tensor& t) { return tanh(t); }, xs, g);
  const auto grad_gelu = f32_grad([](const Tensor& t) { return gelu(t); }, xs, g);
  std::vector<float> dtanh(xs.size()), dgelu(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    dtanh[i] = grad_tanh[i] / g[i];  // exact: g is a power of two
    dgelu[i] = grad_gelu[i] / g[i];
  }
  const WorstError wt = max_floored_relative_error(xs, dtanh, ref_tanh_grad);
  const WorstError wg = max_floored_relative_error(xs, dgelu, ref_gelu_grad);
  INFO("tanh worst at x = ", wt.x, ": ", wt.error, "; gelu worst at x = ", wg.x, ": ", wg.error);
  CHECK(wt.error <= 1e-5);
  CHECK(wg.error <= 1e-5);
}
