// The per-element and per-row math the CUDA kernels share with the CPU (kernels/nn_math.h,
// kernels/optim_math.h), checked here on the CPU: the running softmax (max, sum) that the kernels
// combine in trees gives the two-pass result in any split and order, -inf included; a Philox block
// per thread decides dropout exactly as dropout_keep does; unscale_grad finds inf and NaN; the step
// coefficients round once from f64.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/nn_math.h"
#include "kernels/optim_math.h"

using namespace accel;

namespace {

// The CPU loop's two passes: max, then sum(exp(x - max)).
std::pair<double, double> two_pass(const std::vector<float>& v) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : v) m = std::max(m, x);
  double s = 0;
  for (float x : v) s += std::exp(static_cast<double>(x) - m);
  return {m, s};
}

// The kernels' shape: `lanes` running partials over a strided split, then a shuffle-down tree.
std::pair<float, float> tree(const std::vector<float>& v, int lanes) {
  std::vector<float> m(static_cast<size_t>(lanes), -std::numeric_limits<float>::infinity()), s(m.size(), 0.0f);
  for (size_t j = 0; j < v.size(); ++j) online_softmax_add(m[j % lanes], s[j % lanes], v[j]);
  for (int offset = lanes / 2; offset > 0; offset /= 2)
    for (int l = 0; l < offset; ++l) online_softmax_combine(m[l], s[l], m[l + offset], s[l + offset]);
  return {m[0], s[0]};
}

}  // namespace

TEST_CASE("online softmax: any split and tree order gives the two-pass max and sum") {
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<float>(std::sin(i * 0.7) * 30.0 + (i % 17)));
  const auto [m, s] = two_pass(v);
  for (int lanes : {1, 2, 32, 64, 512}) {
    const auto [tm, ts] = tree(v, lanes);
    CHECK(tm == static_cast<float>(m));
    CHECK(ts == doctest::Approx(s).epsilon(1e-5));
  }
  // Increasing, decreasing: every element rescales the running sum, or none does.
  std::vector<float> up(300), down(300);
  for (int i = 0; i < 300; ++i) up[i] = down[299 - i] = static_cast<float>(i) * 0.1f;
  CHECK(tree(up, 1).second == doctest::Approx(two_pass(up).second).epsilon(1e-5));
  CHECK(tree(down, 1).second == doctest::Approx(two_pass(down).second).epsilon(1e-5));
}

TEST_CASE("online softmax: -inf entries (masked attention) add nothing, in any position") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {-inf, -inf, 1.0f, -inf, 2.0f, -inf};
  for (int lanes : {1, 2, 4}) {
    const auto [m, s] = tree(v, lanes);
    CHECK(m == 2.0f);
    CHECK(s == doctest::Approx(1.0 + std::exp(-1.0)).epsilon(1e-6));
  }
  // A part that saw only -inf combines as nothing, on either side.
  float m = -inf, s = 0;
  online_softmax_add(m, s, -inf);
  float m2 = 0.5f, s2 = 3.0f;
  online_softmax_combine(m2, s2, m, s);
  CHECK(m2 == 0.5f);
  CHECK(s2 == 3.0f);
  online_softmax_combine(m, s, 0.5f, 3.0f);
  CHECK(m == 0.5f);
  CHECK(s == 3.0f);
}

TEST_CASE("dropout: a thread's Philox block decides its four elements as dropout_keep does") {
  for (uint64_t offset : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 40}) {
    for (uint64_t block = 0; block < 64; ++block) {
      const Philox4 r = philox4x32(99, offset + block, 0);
      for (uint64_t lane = 0; lane < 4; ++lane)
        for (float p : {0.0f, 0.1f, 0.5f, 0.9f, 1.0f})
          CHECK(dropout_keep_word(r.v[lane], p) == dropout_keep(99, offset, 4 * block + lane, p));
    }
  }
}

TEST_CASE("unscale_grad: scales, and clears `finite` for inf and NaN only") {
  bool finite = true;
  CHECK(unscale_grad(1024.0f, 1.0f / 1024.0f, finite) == 1.0f);
  CHECK(unscale_grad(std::numeric_limits<float>::max(), 0.5f, finite) == std::numeric_limits<float>::max() / 2);
  CHECK(unscale_grad(-0.0, 2.0, finite) == 0.0);
  CHECK(finite);
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    bool f = true;
    unscale_grad(static_cast<float>(bad), 0.5f, f);
    CHECK_FALSE(f);
    f = true;
    unscale_grad(bad, 0.5, f);
    CHECK_FALSE(f);
  }
  // The check looks at the grad itself: a finite grad that the scale overflows is not flagged.
  finite = true;
  CHECK(std::isinf(unscale_grad(3e38f, 10.0f, finite)));
  CHECK(finite);
}

TEST_CASE("step coefficients: computed in f64, rounded once to the compute type") {
  const AdamWCoeffs<double> k = adamw_coeffs(1e-3, 0.9, 0.999, 1e-8, 0.01, 3);
  CHECK(k.step_size == doctest::Approx(1e-3 / (1 - 0.9 * 0.9 * 0.9)));
  CHECK(k.sqrt_bias_correction2 == doctest::Approx(std::sqrt(1 - std::pow(0.999, 3))));
  CHECK(k.decay == 1.0 - 1e-3 * 0.01);
  const AdamWCoeffs<float> f = coeffs_as<float>(k);
  CHECK(f.step_size == static_cast<float>(k.step_size));
  CHECK(f.one_minus_beta1 == static_cast<float>(1.0 - 0.9));
  const SgdCoeffs<float> s = coeffs_as<float>(sgd_coeffs(0.1, 0.9, 0.25, 0.0, false, true));
  CHECK(s.one_minus_dampening == 0.75f);
  CHECK(s.use_momentum);
  CHECK(s.first_step);
  CHECK_FALSE(sgd_coeffs(0.1, 0.0, 0.0, 0.0, false, false).use_momentum);
}
