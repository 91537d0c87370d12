// Layer norm's row statistics (kernels/nn_math.h) as the CUDA kernels take them, checked on the CPU:
// per-lane running sums over a strided split, combined in a shuffle-down tree, then layer_norm_row.
// On rows of 1000 + N(0, 1) the normalised values stay within 1e-6 of f64 for rows up to 8192 wide.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/nn_math.h"
#include "tests/layer_norm_reference.h"

using namespace accel;
using namespace accel::test;

namespace {

// The kernels' shape: `lanes` threads each sum their strided elements in order, then a tree.
template <class Term>
float tree_sum(int64_t dim, int lanes, Term term) {
  std::vector<float> partial(static_cast<size_t>(lanes), 0.0f);
  for (int64_t j = 0; j < dim; ++j) partial[j % lanes] += term(j);
  for (int offset = lanes / 2; offset > 0; offset /= 2)
    for (int l = 0; l < offset; ++l) partial[l] += partial[l + offset];
  return partial[0];
}

}  // namespace

TEST_CASE("layer norm row statistics in the kernels' tree order stay accurate far from zero") {
  for (int64_t dim : {64, 256, 1024, 4096, 8192}) {
    for (int lanes : {32, 256, 1024}) {
      const std::vector<float> x = far_from_zero_rows(1, dim, static_cast<uint32_t>(dim + lanes));
      const float inv_dim = 1.0f / static_cast<float>(dim), shift = x[0];
      const float mean = layer_norm_mean(shift, tree_sum(dim, lanes, [&](int64_t j) { return x[j] - shift; }), inv_dim);
      const float dev = tree_sum(dim, lanes, [&](int64_t j) { return x[j] - mean; });
      const float sq = tree_sum(dim, lanes, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); });
      const LayerNormRow<float> row = layer_norm_row(mean, dev, sq, inv_dim, 1e-5f);
      const RowStats64 want = row_stats64(x, 0, dim, 1e-5);
      double worst = 0;
      for (int64_t j = 0; j < dim; ++j)
        worst = std::max(worst, std::fabs(layer_norm_elem(x[j], row, 1.0f, 0.0f) - (x[j] - want.mean) * want.rstd));
      INFO("dim ", dim, ", lanes ", lanes);
      CHECK(worst < 1e-6);
      CHECK(std::fabs(layer_norm_row_mean(row) - want.mean) <= 3.1e-5);  // half an ulp of 1000
      CHECK(std::fabs(row.rstd / want.rstd - 1) < 1e-6);
    }
  }
}

TEST_CASE("layer norm row statistics: a constant row has zero variance, and NaN passes") {
  const float inv_dim = 1.0f / 4;
  const LayerNormRow<float> flat = layer_norm_row(3.0f, 0.0f, 0.0f, inv_dim, 1e-5f);
  CHECK(flat.rstd == doctest::Approx(1 / std::sqrt(1e-5)));
  // Rounding can leave sum(d^2) - sum(d)^2 / n a little below zero: the variance is clamped at 0.
  CHECK(layer_norm_row(3.0f, 1e-3f, 0.0f, inv_dim, 1e-5f).rstd == doctest::Approx(1 / std::sqrt(1e-5)));
  CHECK(std::isnan(layer_norm_row(3.0f, 0.0f, NAN, inv_dim, 1e-5f).rstd));
}
