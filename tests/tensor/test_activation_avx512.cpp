// The AVX-512 tanh, gelu and their grads' loops of tensor/cpu/activation_avx512.h give the bits of the
// scalar functions of kernels/activation_math.h (which the CUDA kernels and the accuracy tests use),
// over a sweep of every 61st float bit pattern of both signs plus the special values and every
// interval and cell edge, in runs whose lengths leave a masked tail; and the tensor ops take that path.
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

// The first float of each of gelu_f32's cells after the first, and where it changes form: found by
// bisection on the bits, as the cell is monotone in x.
std::vector<float> gelu_cell_edges() {
  using activation_tables::kGeluHigh, activation_tables::kGeluLow;
  const auto cell = [](float x) { return gelu_table_detail::cell(kGeluHigh < x ? kGeluHigh : x); };
  std::vector<float> edges = {kGeluLow, kGeluHigh};
  float prev = kGeluLow;
  for (float x = kGeluLow; x <= kGeluHigh; x += 1e-3f) {
    if (cell(x) == cell(prev)) continue;
    float lo = prev, hi = x;  // cell(lo) != cell(hi), lo < hi
    while (std::nextafter(lo, hi) != hi) {
      const float mid = 0.5f * (lo + hi);
      (cell(mid) == cell(prev) ? lo : hi) = mid;
    }
    edges.push_back(hi);
    prev = x;
  }
  return edges;
}

// Floats near each place the kernels branch or change interval, a few ulps either side.
std::vector<float> activation_edges() {
  std::vector<float> edges = {0.0f, 0.5f, 9.0f, 13.0f, 14.0f, 15.0f, 16.0f, gelu_grad_detail::kLow,
                              gelu_grad_detail::kHigh, std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  for (int octave = 0; octave < 4; ++octave)
    for (int sub = 0; sub < 8; ++sub) edges.push_back(std::ldexp(1.0f + sub / 8.0f, octave) - 1.0f);
  for (int k = -16; k <= 16; ++k) edges.push_back((k + 0.5f) * 0.416f);  // GELU-grad cell edges
  const std::vector<float> cells = gelu_cell_edges();
  edges.insert(edges.end(), cells.begin(), cells.end());
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
  while (xs.size() % 32 != 23) xs.push_back(1.0f);  // pairs, then one vector, then a masked tail
  return xs;
}

}  // namespace

TEST_CASE("AVX-512 tanh, gelu and their grads compute the scalar functions' bits") {
  const std::vector<float> xs = bit_sweep();
  REQUIRE(xs.size() % 32 > 16);
  std::vector<float> got(xs.size()), ones(xs.size(), 1.0f);
  float first = 0;
  cpu::avx512::tanh_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  size_t bad = test::count_mismatches(xs, got, [](float x) { return tanh_f32(x); }, first);
  INFO("tanh: ", bad, " mismatches, first at x = ", first);
  CHECK(bad == 0);
  cpu::avx512::gelu_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  bad = test::count_mismatches(xs, got, [](float x) { return gelu_f32(x); }, first);
  INFO("gelu: ", bad, " mismatches, first at x = ", first);
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

TEST_CASE("the GELU cell edges are all found") {
  CHECK(gelu_cell_edges().size() == 2 + 31);
}

namespace {

// The scalar form the f32 gelu op takes in this build: the exp form where AVX2 is the widest vector
// form (a table lookup per lane costs a gather there), else the table form.
float gelu_op_form(float x) {
#if defined(ACCEL_HAVE_ACTIVATION_AVX2) && !defined(ACCEL_HAVE_ACTIVATION_AVX512)
  return gelu_exp_f32(x);
#else
  return gelu_f32(x);
#endif
}

}  // namespace

TEST_CASE("the f32 tanh and gelu ops and their backwards on a contiguous tensor give the scalar functions' bits") {
  std::vector<float> xs = activation_edges();
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 7e-3f);
  const Tensor x = from_vector<float>(xs);
  const Tensor y = nograd::tanh(x);
  const std::vector<float> gelu_v = nograd::gelu(x).to_vector<float>();
  const Tensor g = nograd::tanh_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const Tensor gg = nograd::gelu_backward(from_vector<float>(std::vector<float>(xs.size(), 1.0f)), x);
  const std::vector<float> yv = y.to_vector<float>(), gv = g.to_vector<float>(), ggv = gg.to_vector<float>();
  float first = 0;
  CHECK(test::count_mismatches(xs, yv, [](float x) { return tanh_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, gelu_v, [](float x) { return gelu_op_form(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, gv, [](float x) { return tanh_grad_f32(x); }, first) == 0);
  CHECK(test::count_mismatches(xs, ggv, [](float x) { return gelu_grad_f32(x); }, first) == 0);
}
