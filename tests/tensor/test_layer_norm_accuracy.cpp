// layer_norm on rows far from zero (1000 + N(0, 1) in f32) against f64 statistics computed here, for
// rows 64 to 8192 wide: the output within 2e-6 (an f32 sum taken one element at a time was 1.7e-4 to
// 3e-3 off, growing with the width), the mean within half an ulp, and the input grad within 5e-6
// (it was 7e-6 to 2.2e-5: its xhat is taken from the saved mean).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "accel.h"
#include "tensor/nograd/nn_ops.h"
#include "tests/layer_norm_reference.h"

using namespace accel;
using namespace accel::test;

namespace {

constexpr int64_t kRows = 8;
constexpr double kEps = 1e-5;

}  // namespace

TEST_CASE("layer_norm forward stays accurate on rows far from zero, however wide") {
  for (int64_t dim : {64, 256, 1024, 4096, 8192}) {
    const std::vector<float> xv = far_from_zero_rows(kRows, dim, static_cast<uint32_t>(dim));
    std::vector<float> wv(static_cast<size_t>(dim)), bv(static_cast<size_t>(dim));
    for (int64_t j = 0; j < dim; ++j) {
      wv[j] = 0.5f + 0.25f * static_cast<float>(j % 5);
      bv[j] = 0.125f * static_cast<float>(j % 3) - 0.125f;
    }
    const auto r = nograd::layer_norm(from_vector<float>(xv, {kRows, dim}), from_vector<float>(wv),
                                      from_vector<float>(bv), kEps);
    const auto out = r.out.to_vector<float>(), mean = r.mean.to_vector<float>(), rstd = r.rstd.to_vector<float>();
    double worst = 0, worst_mean = 0, worst_rstd = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      const RowStats64 want = row_stats64(xv, i, dim, kEps);
      for (int64_t j = 0; j < dim; ++j) {
        const double y = (xv[i * dim + j] - want.mean) * want.rstd * wv[j] + bv[j];
        worst = std::max(worst, std::fabs(out[i * dim + j] - y));
      }
      worst_mean = std::max(worst_mean, std::fabs(mean[i] - want.mean));
      worst_rstd = std::max(worst_rstd, std::fabs(rstd[i] / want.rstd - 1));
    }
    INFO("dim ", dim, ": output ", worst, ", mean ", worst_mean, ", rstd ", worst_rstd);
    CHECK(worst < 2e-6);
    CHECK(worst_mean <= 3.1e-5);  // half an ulp of 1000
    CHECK(worst_rstd < 1e-6);
  }
}

TEST_CASE("layer_norm backward stays accurate on rows far from zero") {
  for (int64_t dim : {64, 1024, 8192}) {
    const std::vector<float> xv = far_from_zero_rows(kRows, dim, static_cast<uint32_t>(dim + 1));
    std::vector<float> gv(static_cast<size_t>(kRows * dim));
    for (size_t k = 0; k < gv.size(); ++k) gv[k] = static_cast<float>(static_cast<int>(k % 7) - 3) * 0.25f;
    const Tensor x = from_vector<float>(xv, {kRows, dim}), g = from_vector<float>(gv, {kRows, dim});
    const auto r = nograd::layer_norm(x, Tensor(), Tensor(), kEps);
    const auto grads = nograd::layer_norm_backward(g, x, r.mean, r.rstd, Tensor(), Tensor());
    const auto dx = grads.grad_input.to_vector<float>();
    double worst = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      const RowStats64 want = row_stats64(xv, i, dim, kEps);
      double mean_g = 0, mean_g_xhat = 0;
      for (int64_t j = 0; j < dim; ++j) {
        mean_g += gv[i * dim + j];
        mean_g_xhat += gv[i * dim + j] * (xv[i * dim + j] - want.mean) * want.rstd;
      }
      mean_g /= static_cast<double>(dim);
      mean_g_xhat /= static_cast<double>(dim);
      for (int64_t j = 0; j < dim; ++j) {
        const double xhat = (xv[i * dim + j] - want.mean) * want.rstd;
        const double want_dx = want.rstd * (gv[i * dim + j] - mean_g - xhat * mean_g_xhat);
        worst = std::max(worst, std::fabs(dx[i * dim + j] - want_dx));
      }
    }
    INFO("dim ", dim, ": input grad ", worst);
    CHECK(worst < 5e-6);
  }
}
