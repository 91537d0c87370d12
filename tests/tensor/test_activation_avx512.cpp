// The AVX-512 tanh, gelu and their grads' loops of tensor/cpu/activation_avx512.h give the bits of the
// scalar functions of kernels/activation_math.h (which the CUDA kernels and the accuracy tests use),
// over a sweep of every 61st float bit pattern of both signs plus the special values and every
// interval and cell edge, in runs whose lengths leave a masked tail; and the tensor ops give those bits
// on whichever form the build takes (AVX-512, the AVX2 forms of test_activation_avx2.cpp, or scalar).
#include <doctest/doctest.h>

#include <vector>

#include "accel.h"
#include "kernels/activation_math.h"
#include "tensor/cpu/activation_avx512.h"
#include "tensor/nograd/elementwise.h"
#include "tests/tensor/activation_edges.h"
#include "tests/tensor/float_sweep.h"

using namespace accel;

#if defined(ACCEL_HAVE_ACTIVATION_AVX512)

TEST_CASE("AVX-512 tanh, gelu and their grads compute the scalar functions' bits") {
  const std::vector<float> xs = test::vector_form_sweep(32, 23);  // pairs, then one vector, then a masked tail
  REQUIRE(xs.size() % 32 > 16);
  std::vector<float> got(xs.size()), ones(xs.size(), 1.0f);
  float first = 0;
  // INFO captures by reference: a scope per check, so that each failure names its own function
  {
    cpu::avx512::tanh_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_f32(x); }, first);
    INFO("tanh: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx512::gelu_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return gelu_f32(x); }, first);
    INFO("gelu: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx512::tanh_backward_f32(ones.data(), xs.data(), got.data(), static_cast<int64_t>(xs.size()));
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_grad_f32(x); }, first);
    INFO("tanh grad: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
  {
    cpu::avx512::gelu_backward_f32(ones.data(), xs.data(), got.data(), static_cast<int64_t>(xs.size()));
    const size_t bad = test::count_mismatches(xs, got, [](float x) { return gelu_grad_f32(x); }, first);
    INFO("gelu grad: ", bad, " mismatches, first at x = ", first);
    CHECK(bad == 0);
  }
}

#endif

TEST_CASE("the GELU cell edges are all found") {
  CHECK(test::gelu_cell_edges().size() == 2 + 31);
}

TEST_CASE("the f32 tanh and gelu ops and their backwards on a contiguous tensor give the scalar functions' bits") {
  std::vector<float> xs = test::activation_edges();
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 7e-3f);
  const Tensor x = from_vector<float>(xs);
  const Tensor y = nograd::tanh(x);
  const std::vector<float> gelu_v = nograd::gelu(x).to_vector<float>();
  const Tensor g = nograd::tanh_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const Tensor gg = nograd::gelu_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const std::vector<float> yv = y.to_vector<float>(), gv = g.to_vector<float>(), ggv = gg.to_vector<float>();
  float first = 0;
  CHECK(test::count_mismatches(xs, yv, [](float x) { return tanh_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, gelu_v, [](float x) { return gelu_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, gv, [](float x) { return tanh_grad_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, ggv, [](float x) { return gelu_grad_f32(x); }, first) == 0);
}
