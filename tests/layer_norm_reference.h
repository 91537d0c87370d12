// What the layer norm accuracy tests share: rows far from zero (1000 + N(0, 1) in f32, where summing
// one element at a time in f32 loses the deviations) and the f64 reference of their statistics.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace accel::test {

// rows x dim values 1000 + N(0, 1), rounded to f32.
inline std::vector<float> far_from_zero_rows(int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(rows * dim));
  for (float& v : x) v = static_cast<float>(1000.0 + normal(gen));
  return x;
}

struct RowStats64 {
  double mean, rstd;
};

// The mean and 1 / sqrt(var + eps) of row r, in f64 from the f32 values.
inline RowStats64 row_stats64(const std::vector<float>& x, int64_t r, int64_t dim, double eps) {
  double sum = 0;
  for (int64_t j = 0; j < dim; ++j) sum += x[r * dim + j];
  const double mean = sum / static_cast<double>(dim);
  double sq = 0;
  for (int64_t j = 0; j < dim; ++j) sq += (x[r * dim + j] - mean) * (x[r * dim + j] - mean);
  return {mean, 1 / std::sqrt(sq / static_cast<double>(dim) + eps)};
}

}  // namespace accel::test
