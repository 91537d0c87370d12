// The AVX2 tanh, gelu and their grads' loops of tensor/cpu/activation_avx2.h give the bits of the
// scalar functions of kernels/activation_math.h, as the AVX-512 loops do, over the sweep that
// tests/tensor/test_activation_avx512.cpp uses (every 61st float bit pattern of both signs, the
// special values, both sides of every interval and cell edge), in a run whose length leaves one
// vector after the pairs and a scalar tail. That file checks the ops on whichever form they take.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/activation_math.h"
#include "tensor/cpu/activation_avx2.h"
#include "tests/tensor/activation_edges.h"
#include "tests/tensor/float_sweep.h"

using namespace accel;

#if defined(ACCEL_HAVE_ACTIVATION_AVX2)

TEST_CASE("AVX2 tanh, gelu and their grads compute the scalar functions' bits") {
  const std::vector<float> xs = test::vector_form_sweep(16, 13);  // pairs of 8, then one, then 5 scalar
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> got(xs.size()), ones(xs.size(), 1.0f);
  float first = 0;
  // INFO captures by reference: a scope per check, so that each failure names its own function
  {
    cpu::avx2::tanh_f32(xs.data(), got.data(), n);
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_f32(x); }, first);
    INFO("tanh: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx2::gelu_f32(xs.data(), got.data(), n);
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return gelu_f32(x); }, first);
    INFO("gelu: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx2::tanh_backward_f32(ones.data(), xs.data(), got.data(), n);
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_grad_f32(x); }, first);
    INFO("tanh grad: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx2::gelu_backward_f32(ones.data(), xs.data(), got.data(), n);
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return gelu_grad_f32(x); }, first);
    INFO("gelu grad: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
}

TEST_CASE("the AVX2 backward loops multiply by the upstream grad, tail included") {
  // grad = 3 x and x over the edges: out must be grad * f(x) in f32, lane for lane.
  const std::vector<float> xs = test::activation_edges();
  std::vector<float> grad(xs.size()), got(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) grad[i] = 3.0f * xs[i];
  const int64_t n = static_cast<int64_t>(xs.size());
  float first = 0;
  std::vector<float> want(xs.size());
  cpu::avx2::tanh_backward_f32(grad.data(), xs.data(), got.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) want[i] = grad[i] * tanh_grad_f32(xs[i]);
  CHECK(test::count_mismatches(want, got, [](float w) { return w; }, first) == 0);
  cpu::avx2::gelu_backward_f32(grad.data(), xs.data(), got.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) want[i] = grad[i] * gelu_grad_f32(xs[i]);
  CHECK(test::count_mismatches(want, got, [](float w) { return w; }, first) == 0);
}

#endif
