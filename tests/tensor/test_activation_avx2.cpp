// The AVX2 GELU forward of tensor/cpu/activation_avx2.h gives the bits of the scalar gelu_exp_f32 of
// kernels/activation_math.h (the accuracy tests measure it), over every 61st float bit pattern of
// both signs plus the special values and the clamp edges, in a run whose length leaves a scalar tail.
// tests/tensor/test_activation_avx512.cpp checks the f32 gelu op on whichever form it takes.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "kernels/activation_math.h"
#include "tensor/cpu/activation_avx2.h"
#include "tests/tensor/float_sweep.h"

using namespace accel;

#if defined(ACCEL_HAVE_ACTIVATION_AVX2)

namespace {

// Floats a few ulps either side of the places gelu_exp_f32 clamps or saturates, zero, and the specials.
std::vector<float> gelu_edges() {
  return test::around_points({0.0f, 1.0f, gelu_detail::kSaturation, 3.0f, 5.5f, std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()});
}

}  // namespace

TEST_CASE("AVX2 gelu computes the scalar function's bits") {
  std::vector<float> xs = test::bit_pattern_sweep();
  const std::vector<float> edges = gelu_edges();
  xs.insert(xs.end(), edges.begin(), edges.end());
  while (xs.size() % 8 != 5) xs.push_back(1.0f);  // the last 5 take the scalar tail
  std::vector<float> got(xs.size());
  cpu::avx2::gelu_exp_f32(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  float first = 0;
  const size_t bad = test::count_mismatches(xs, got, [](float x) { return gelu_exp_f32(x); }, first);
  INFO("gelu: ", bad, " mismatches, first at x = ", first);
  CHECK(bad == 0);
}

#endif
