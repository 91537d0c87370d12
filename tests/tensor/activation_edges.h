// The floats where the f32 tanh, GELU and their grads of kernels/activation_math.h branch or change
// cell, for the bit-for-bit checks of their vector forms (tests/tensor/test_activation_avx2.cpp and
// test_activation_avx512.cpp).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/activation_math.h"
#include "tests/tensor/float_sweep.h"

namespace accel::test {

// The first float of each of gelu_f32's cells after the first, and where it changes form: found by
// bisection on the bits, as the cell is monotone in x.
inline std::vector<float> gelu_cell_edges() {
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
inline std::vector<float> activation_edges() {
  std::vector<float> edges = {0.0f, 0.5f, 9.0f, 13.0f, 14.0f, 15.0f, 16.0f, gelu_grad_detail::kLow,
                              gelu_grad_detail::kHigh, std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  for (int octave = 0; octave < 4; ++octave)
    for (int sub = 0; sub < 8; ++sub) edges.push_back(std::ldexp(1.0f + sub / 8.0f, octave) - 1.0f);
  for (int k = -16; k <= 16; ++k) edges.push_back((k + 0.5f) * 0.416f);  // GELU-grad cell edges
  const std::vector<float> cells = gelu_cell_edges();
  edges.insert(edges.end(), cells.begin(), cells.end());
  return around_points(edges);
}

// Every 61st bit pattern and the edges, padded with 1s to a length of `rem` mod `period`.
inline std::vector<float> vector_form_sweep(size_t period, size_t rem) {
  std::vector<float> xs = bit_pattern_sweep();
  const std::vector<float> edges = activation_edges();
  xs.insert(xs.end(), edges.begin(), edges.end());
  while (xs.size() % period != rem) xs.push_back(1.0f);
  return xs;
}

}  // namespace accel::test
