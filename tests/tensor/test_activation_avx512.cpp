// The AVX-512 tanh, tanh-grad and gelu-grad loops of tensor/cpu/activation_avx512.h give the bits of the scalar
// functions of kernels/activation_math.h (which the CUDA kernels and the accuracy tests use), over a
// sweep of every 61st float bit pattern of both signs plus the special values and every interval
// edge, in runs whose lengths leave a masked tail; and the tensor ops take that path.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "accel.h"
#include "kernels/activation_math.h"
#include "tensor/cpu/activation_avx512.h"
#include "tensor/nograd/elementwise.h"
#include "tests/tensor/float_sweep.h"

using namespace accel;

namespace {

// Floats near each place the kernels branch or change interval, a few ulps either side.
std::vector<float> activation_edges() {
  std::vector<float> edges = {0.0f, 0.5f, 9.0f, 13.0f, 14.0f, 15.0f, 16.0f, gelu_grad_detail::kLow,
                              gelu_grad_detail::kHigh, std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  for (int octave = 0; octave < 4; ++octave)
    for (int sub = 0; sub < 8; ++sub) edges.push_back(std::ldexp(1.0f + sub / 8.0f, octave) - 1.0f);
  for (int k = -16; k <= 16; ++k) edges.push_back((k + 0.5f) * 0.416f);  // GELU-grad cell edges
  return test::around_points(edges);
}

}  // namespace

#if defined(ACCEL_HAVE_ACTIVATION_AVX512)

namespace {

// Only the AVX-512 case uses it: without AVX-512 (-march=native on such a CPU) it would be unused.
std::vector<float> bit_sweep() {
  std::vector<float> xs = test::bit_pattern_sweep();
  const std::vector<float> edges = activation_edges();
  xs.insert(xs.end(), edges.begin(), edges.end());
  while (xs.size() % 16 != 7) xs.push_back(1.0f);  // the last block is a masked tail
  return xs;
}

}  // namespace

TEST_CASE("AVX-512 tanh, its grad and gelu's grad compute the scalar functions' bits") {
  const std::vector<float> xs = bit_sweep();
  REQUIRE(xs.size() % 16 != 0);
  std::vector<float> got(xs.size()), ones(xs.size(), 1.0f);
  float first = 0;
  cpu::avx512::tanh_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_f32(x); }, first);
  INFO("tanh: ", bad, " mismatches, first at x = ", first);
  CHECK(bad == 0);
  cpu::avx512::tanh_backward_f32(ones.data(), xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  bad = test::count_mismatches(xs, got, [](float x) { return tanh_grad_f32(x); }, first);
  INFO("tanh grad: ", bad, " mismatches, first at x = ", first);
  CHECK(bad == 0);
  cpu::avx512::gelu_backward_f32(ones.data(), xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  bad = test::count_mismatches(xs, got, [](float x) { return gelu_grad_f32(x); }, first);
  INFO("gelu grad: ", bad, " mismatches, first at x = ", first);
  CHECK(bad == 0);
}

#endif

TEST_CASE("the f32 tanh op, its backward and gelu's on a contiguous tensor give the scalar functions' bits") {
  std::vector<float> xs = activation_edges();
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 7e-3f);
  const Tensor x = from_vector<float>(xs);
  const Tensor y = nograd::tanh(x);
  const Tensor g = nograd::tanh_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const Tensor gg = nograd::gelu_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const std::vector<float> yv = y.to_vector<float>(), gv = g.to_vector<float>(), ggv = gg.to_vector<float>();
  float first = 0;
  CHECK(test::count_mismatches(xs, yv, [](float x) { return tanh_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, gv, [](float x) { return tanh_grad_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, ggv, [](float x) { return gelu_grad_f32(x); }, first) == 0);
}
