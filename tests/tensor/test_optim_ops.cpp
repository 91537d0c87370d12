// Fused SGD and AdamW updates against hand-written PyTorch-style reference loops over several
// steps, for f64, f32 and f16/bf16 params, the loss scaler's unscale, the gradient norm's sum, and
// their error messages.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/optim_ops.h"
#include "tensor/nograd/views.h"

using namespace accel;
using Vec = std::vector<double>;

namespace {

Vec values(const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); }

Tensor random(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return nograd::to_dtype(randn(shape, gen, DType::f64), dtype);
}

double max_rel_error(const Vec& got, const Vec& want) {
  REQUIRE(got.size() == want.size());
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
  return err;
}

// torch.optim.SGD's update for one tensor, written out.
void ref_sgd(Vec& p, const Vec& g, Vec& buf, const nograd::SgdConfig& c, bool first_step) {
  for (size_t i = 0; i < p.size(); ++i) {
    double d = g[i] + c.weight_decay * p[i];
    if (c.momentum != 0) {
      buf[i] = first_step ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
      d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
    }
    p[i] -= c.lr * d;
  }
}

// torch.optim.AdamW's update for one tensor, written out.
void ref_adamw(Vec& p, const Vec& g, Vec& m, Vec& v, const nograd::AdamWConfig& c, int64_t step) {
  const double bc1 = 1 - std::pow(c.beta1, step), bc2 = 1 - std::pow(c.beta2, step);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - c.lr * c.weight_decay;
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * g[i];
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * g[i] * g[i];
    p[i] -= c.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
  }
}

// Rounds reference values to a 16-bit dtype, as the fused update stores them.
void round_to(Vec& p, DType dtype) {
  if (dtype == DType::f16 || dtype == DType::bf16) p = values(nograd::to_dtype(from_vector<double>(p), dtype));
}

DType state_dtype(DType param) { return param == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace

TEST_CASE("sgd_step_ follows PyTorch's SGD over several steps: momentum, dampening, nesterov, weight decay") {
  const std::vector<nograd::SgdConfig> configs{
      {0.1, 0.0, 0.0, 0.0, false},
      {0.05, 0.0, 0.0, 0.01, false},
      {0.1, 0.9, 0.0, 0.0, false},
      {0.1, 0.9, 0.3, 0.01, false},
      {0.02, 0.8, 0.0, 0.05, true},
  };
  const std::vector<Shape> shapes{{3, 5}, {7}};
  for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    const double tol = dtype == DType::f64 ? 1e-14 : dtype == DType::f32 ? 1e-6 : dtype == DType::f16 ? 2e-3 : 1.6e-2;
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const nograd::SgdConfig& c = configs[ci];
      INFO(dtype_name(dtype), " config ", ci);
      std::vector<Tensor> params, bufs;
      std::vector<Vec> ref_p, ref_buf;
      for (size_t k = 0; k < shapes.size(); ++k) {
        params.push_back(random(shapes[k], 10 + k, dtype));
        ref_p.push_back(values(params.back()));
        if (c.momentum != 0) bufs.push_back(zeros(shapes[k], state_dtype(dtype)));
        ref_buf.push_back(Vec(ref_p.back().size(), 0.0));
      }
      for (int step = 0; step < 4; ++step) {
        std::vector<Tensor> grads;
        for (size_t k = 0; k < shapes.size(); ++k) {
          grads.push_back(random(shapes[k], 100 * step + k, dtype));
          ref_sgd(ref_p[k], values(grads[k]), ref_buf[k], c, step == 0);
          round_to(ref_p[k], dtype);
        }
        nograd::sgd_step_(params, grads, bufs, c, step == 0);
        for (size_t k = 0; k < shapes.size(); ++k) {
          // Halves may round a value the other way after a few steps: allow a 16-bit ulp or two.
          CHECK_MESSAGE(max_rel_error(values(params[k]), ref_p[k]) < tol, "step ", step, " param ", k);
          if (c.momentum != 0) CHECK(max_rel_error(values(bufs[k]), ref_buf[k]) < (dtype == DType::f64 ? 1e-14 : tol));
        }
      }
    }
  }
}

TEST_CASE("fused steps read strided grads, need no buffers without momentum, and thread large params") {
  Tensor p = random({4, 3}, 1, DType::f32);
  const Tensor g = nograd::transpose(random({3, 4}, 2, DType::f32), 0, 1);
  Vec ref = values(p), none;
  ref_sgd(ref, values(g), none, {0.5, 0.0, 0.0, 0.0, false}, true);
  nograd::sgd_step_({p}, {g}, {}, {0.5, 0.0, 0.0, 0.0, false}, true);
  CHECK(max_rel_error(values(p), ref) < 1e-7);
  // Large params take the threaded path.
  Tensor big = random({50000}, 3, DType::f32), buf = zeros({50000});
  Tensor m = zeros({50000}), v = zeros({50000});
  const Tensor big_grad = random({50000}, 4, DType::f32);
  Vec ref_big = values(big), ref_buf(50000, 0.0), ref_m(50000, 0.0), ref_v(50000, 0.0);
  const nograd::SgdConfig sgd_config{0.1, 0.9, 0.0, 0.01, true};
  ref_sgd(ref_big, values(big_grad), ref_buf, sgd_config, true);
  nograd::sgd_step_({big}, {big_grad}, {buf}, sgd_config, true);
  CHECK(max_rel_error(values(big), ref_big) < 1e-6);
  CHECK(max_rel_error(values(buf), ref_buf) < 1e-6);
  const nograd::AdamWConfig adam_config{};
  ref_adamw(ref_big, values(big_grad), ref_m, ref_v, adam_config, 1);
  nograd::adamw_step_({big}, {big_grad}, {m}, {v}, adam_config, 1);
  CHECK(max_rel_error(values(big), ref_big) < 1e-6);
  // Empty lists do nothing.
  nograd::sgd_step_({}, {}, {}, {}, true);
}

TEST_CASE("adamw_step_ follows PyTorch's AdamW over several steps, with bias correction from step 1") {
  const std::vector<nograd::AdamWConfig> configs{
      {1e-3, 0.9, 0.999, 1e-8, 0.01},
      {0.1, 0.8, 0.99, 1e-6, 0.0},
      {0.05, 0.5, 0.9, 1e-3, 0.1},
  };
  const std::vector<Shape> shapes{{5, 2}, {9}};
  for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    const double tol = dtype == DType::f64 ? 1e-13 : dtype == DType::f32 ? 2e-6 : dtype == DType::f16 ? 2e-3 : 1.6e-2;
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const nograd::AdamWConfig& c = configs[ci];
      INFO(dtype_name(dtype), " config ", ci);
      std::vector<Tensor> params, ms, vs;
      std::vector<Vec> ref_p, ref_m, ref_v;
      for (size_t k = 0; k < shapes.size(); ++k) {
        params.push_back(random(shapes[k], 20 + k, dtype));
        ms.push_back(zeros(shapes[k], state_dtype(dtype)));
        vs.push_back(zeros(shapes[k], state_dtype(dtype)));
        ref_p.push_back(values(params.back()));
        ref_m.push_back(Vec(ref_p.back().size(), 0.0));
        ref_v.push_back(Vec(ref_p.back().size(), 0.0));
      }
      for (int64_t step = 1; step <= 5; ++step) {
        std::vector<Tensor> grads;
        for (size_t k = 0; k < shapes.size(); ++k) {
          grads.push_back(random(shapes[k], 200 * step + k, dtype));
          ref_adamw(ref_p[k], values(grads[k]), ref_m[k], ref_v[k], c, step);
          round_to(ref_p[k], dtype);
        }
        nograd::adamw_step_(params, grads, ms, vs, c, step);
        for (size_t k = 0; k < shapes.size(); ++k) {
          CHECK_MESSAGE(max_rel_error(values(params[k]), ref_p[k]) < tol, "step ", step, " param ", k);
          const double state_tol = dtype == DType::f64 ? 1e-14 : dtype == DType::f32 ? 1e-6 : tol;
          CHECK(max_rel_error(values(ms[k]), ref_m[k]) < state_tol);
          CHECK(max_rel_error(values(vs[k]), ref_v[k]) < state_tol);
        }
      }
    }
  }
}

TEST_CASE("the first AdamW step moves each element by about lr against its grad's sign") {
  // After bias correction, m / sqrt(v) = g / |g| on step 1.
  Tensor p = zeros({4}, DType::f64);
  const Tensor g = from_vector<double>({3.0, -0.5, 1e-3, -20.0});
  nograd::adamw_step_({p}, {g}, {zeros({4}, DType::f64)}, {zeros({4}, DType::f64)}, {0.01, 0.9, 0.999, 1e-12, 0.0}, 1);
  const Vec got = values(p);
  const Vec want{-0.01, 0.01, -0.01, 0.01};
  for (size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-8));
}

TEST_CASE("optimizer step errors name the op, the list entry and what was expected") {
  const Tensor p = zeros({2, 3}), g = zeros({2, 3}), s = zeros({2, 3});
  const nograd::SgdConfig plain{};
  nograd::SgdConfig momentum{};
  momentum.momentum = 0.9;
  auto sgd = [](nograd::SgdConfig c) { return c; };

  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p, p}, {g}, {}, plain, true), "sgd_step_: 2 params but 1 grads", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {}, momentum, true), "sgd_step_: 1 params but 0 momentum_buffers", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {s, s}, plain, true), "sgd_step_: 1 params but 2 momentum_buffers", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({Tensor()}, {g}, {}, plain, true), "sgd_step_: params[0] is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {Tensor()}, {}, plain, true), "sgd_step_: grads[0] is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({zeros({2}, DType::i64)}, {zeros({2}, DType::i64)}, {}, plain, true),
                       "sgd_step_: params[0] is i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p, p}, {g, zeros({3, 2})}, {}, plain, true),
                       "sgd_step_: grads[1] has shape [3, 2], expected [2, 3] like params[1]", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {zeros({2, 3}, DType::f16)}, {}, plain, true),
                       "sgd_step_: grads[0] is f16, expected f32 for f32 params[0]", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({zeros({2, 3}, DType::bf16)}, {zeros({2, 3}, DType::bf16)},
                                      {zeros({2, 3}, DType::bf16)}, momentum, true),
                       "sgd_step_: momentum_buffers[0] is bf16, expected f32 for bf16 params[0]", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {zeros({3})}, momentum, true),
                       "sgd_step_: momentum_buffers[0] has shape [3], expected [2, 3] like params[0]", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({nograd::transpose(zeros({3, 2}), 0, 1)}, {g}, {}, plain, true),
                       "sgd_step_: params[0] is not contiguous (shape [2, 3], strides [1, 2]); it is updated in place",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {nograd::transpose(zeros({3, 2}), 0, 1)}, momentum, true),
                       "sgd_step_: momentum_buffers[0] is not contiguous (shape [2, 3], strides [1, 2]); it is updated "
                       "in place",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {}, sgd({-0.1, 0.0, 0.0, 0.0, false}), true),
                       "sgd_step_: lr must be >= 0, got -0.1", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {}, sgd({0.1, -0.5, 0.0, 0.0, false}), true),
                       "sgd_step_: momentum must be >= 0, got -0.5", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {}, sgd({0.1, 0.0, 0.0, -1.0, false}), true),
                       "sgd_step_: weight_decay must be >= 0, got -1", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {}, sgd({0.1, 0.0, 0.0, 0.0, true}), true),
                       "sgd_step_: nesterov needs momentum > 0 and dampening 0, got momentum 0 and dampening 0", Error);
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({p}, {g}, {s}, sgd({0.1, 0.9, 0.1, 0.0, true}), true),
                       "sgd_step_: nesterov needs momentum > 0 and dampening 0, got momentum 0.9 and dampening 0.1", Error);

  const nograd::AdamWConfig adam{};
  auto with = [&](auto set) {
    nograd::AdamWConfig c = adam;
    set(c);
    return c;
  };
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g, g}, {s}, {s}, adam, 1), "adamw_step_: 1 params but 2 grads", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {}, {s}, adam, 1), "adamw_step_: 1 params but 0 exp_avgs", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s, s}, adam, 1), "adamw_step_: 1 params but 2 exp_avg_sqs", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, adam, 0), "adamw_step_: step counts from 1, got 0", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {Tensor()}, adam, 1), "adamw_step_: exp_avg_sqs[0] is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {zeros({2, 3}, DType::f64)}, {s}, adam, 1),
                       "adamw_step_: exp_avgs[0] is f64, expected f32 for f32 params[0]", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {zeros({6})}, adam, 1),
                       "adamw_step_: exp_avg_sqs[0] has shape [6], expected [2, 3] like params[0]", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, with([](auto& c) { c.lr = -1; }), 1),
                       "adamw_step_: lr must be >= 0, got -1", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, with([](auto& c) { c.beta1 = 1.0; }), 1),
                       "adamw_step_: beta1 must be in [0, 1), got 1", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, with([](auto& c) { c.beta2 = -0.1; }), 1),
                       "adamw_step_: beta2 must be in [0, 1), got -0.1", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, with([](auto& c) { c.eps = -1e-8; }), 1),
                       "adamw_step_: eps must be >= 0, got -1e-08", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({p}, {g}, {s}, {s}, with([](auto& c) { c.weight_decay = -0.01; }), 1),
                       "adamw_step_: weight_decay must be >= 0, got -0.01", Error);
  // Every list entry is checked before any is updated: a bad second entry leaves the first untouched.
  const Tensor first = ones({3}), first_grad = ones({3});
  CHECK_THROWS_WITH_AS(nograd::sgd_step_({first, p}, {first_grad, zeros({5})}, {}, plain, true),
                       "sgd_step_: grads[1] has shape [5], expected [2, 3] like params[1]", Error);
  CHECK_THROWS_WITH_AS(nograd::adamw_step_({first, p}, {first_grad, g}, {zeros({3}), s}, {zeros({3}), zeros({2, 3}, DType::f16)}, adam, 1),
                       "adamw_step_: exp_avg_sqs[1] is f16, expected f32 for f32 params[1]", Error);
  CHECK(values(first) == Vec(3, 1.0));
}

TEST_CASE("unscale_and_check_: multiplies every grad by inv_scale and reports inf or NaN anywhere") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    std::vector<Tensor> grads = {nograd::to_dtype(from_vector<double>({1024, -512, 256, 0.5}), dtype),
                                 nograd::to_dtype(from_vector<double>({8, 16}, {2, 1}), dtype)};
    CHECK_FALSE(nograd::unscale_and_check_(grads, 1.0 / 256));
    CHECK(values(grads[0]) == Vec{4, -2, 1, 0.5 / 256});
    CHECK(values(grads[1]) == Vec{8.0 / 256, 16.0 / 256});
    for (double bad : {INFINITY, -INFINITY, NAN}) {
      // In the second tensor's last element, so a check that stopped early would miss it.
      std::vector<Tensor> g = {nograd::to_dtype(from_vector<double>({1, 2, 3}), dtype),
                               nograd::to_dtype(from_vector<double>({4, 5, bad}), dtype)};
      CHECK(nograd::unscale_and_check_(g, 0.5));
      CHECK(values(g[0]) == Vec{0.5, 1, 1.5});  // still unscaled: the step is skipped, not the pass
    }
  }
}

TEST_CASE("unscale_and_check_: a large grad that inv_scale > 1 would overflow is not an overflow") {
  std::vector<Tensor> g = {nograd::to_dtype(from_vector<double>({60000}), DType::f16)};
  CHECK_FALSE(nograd::unscale_and_check_(g, 4.0));
  CHECK(std::isinf(values(g[0])[0]));
}

TEST_CASE("unscale_and_check_: a long grad is checked in every element across threads") {
  Tensor g = zeros({100003}, DType::f32);
  nograd::fill_(nograd::narrow(g, 0, 77777, 1), NAN);
  CHECK(nograd::unscale_and_check_({g}, 2.0));
  CHECK_FALSE(nograd::unscale_and_check_({zeros({100003}, DType::f32)}, 2.0));
  CHECK_FALSE(nograd::unscale_and_check_({}, 2.0));
}

TEST_CASE("unscale_and_check_: bad arguments") {
  CHECK_THROWS_WITH_AS(nograd::unscale_and_check_({zeros({2}, DType::f32)}, 0.0),
                       "unscale_and_check_: inv_scale must be finite and > 0, got 0", Error);
  CHECK_THROWS_WITH_AS(nograd::unscale_and_check_({zeros({2})}, std::numeric_limits<double>::infinity()),
                       "unscale_and_check_: inv_scale must be finite and > 0, got inf", Error);
  CHECK_THROWS_WITH_AS(nograd::unscale_and_check_({zeros({2}), Tensor()}, 0.5), "unscale_and_check_: grads[1] is undefined",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::unscale_and_check_({zeros({2}, DType::i64)}, 1.0),
                       "unscale_and_check_: grads[0] is i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::unscale_and_check_({zeros({2}, DType::f32), nograd::transpose(zeros({2, 3}), 0, 1)}, 1.0),
                       "unscale_and_check_: grads[1] is not contiguous (shape [3, 2], strides [1, 3]); it is "
                       "updated in place",
                       Error);
}

TEST_CASE("unscale_and_check_: one list of mixed dtypes and an empty tensor, and a bad value at the end of a threaded loop") {
  std::vector<Tensor> grads = {nograd::to_dtype(from_vector<double>({1024, -2048, 0.5}), DType::f32),
                               nograd::to_dtype(from_vector<double>({4096, 8}), DType::bf16),
                               nograd::to_dtype(from_vector<double>({-64}), DType::f16),
                               from_vector<double>({3, 6, 9, 12}), zeros({0})};
  CHECK_FALSE(nograd::unscale_and_check_(grads, 0.25));
  CHECK(values(grads[0]) == Vec{256, -512, 0.125});
  CHECK(values(grads[1]) == Vec{1024, 2});
  CHECK(values(grads[2]) == Vec{-16});
  CHECK(values(grads[3]) == Vec{0.75, 1.5, 2.25, 3});
  // Large enough to take the threaded loop, with the bad value at the very end.
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      Tensor big = nograd::to_dtype(full({300001}, 2.0), dtype);
      nograd::copy_(nograd::narrow(big, 0, 300000, 1), full({1}, bad));
      std::vector<Tensor> list = {nograd::to_dtype(full({3}, 1.0), DType::f32), big};
      CHECK_MESSAGE(nograd::unscale_and_check_(list, 0.5), dtype_name(dtype));
      CHECK(values(nograd::narrow(big, 0, 0, 2)) == Vec{1, 1});  // the finite elements are still scaled
    }
  }
  CHECK_FALSE(nograd::unscale_and_check_({}, 0.5));
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The norm's sum written out in f64, one element at a time.
double ref_norm_power(const std::vector<Tensor>& grads, double p) {
  double total = 0;
  for (const Tensor& g : grads)
    for (double x : values(g)) total = std::isinf(p) ? std::max(total, std::abs(x)) : total + std::pow(std::abs(x), p);
  return total;
}

}  // namespace

TEST_CASE("grad_norm_power: the f64 sum of |g|^p (max |g| for inf) over a list, any dtype, strided or not") {
  // Past one block (2^15 elements) and the threading grain, with a partial last block.
  const Tensor big = random({70001}, 41, DType::f32);
  const Tensor strided = nograd::transpose(random({37, 53}, 42, DType::f32), 0, 1);
  REQUIRE_FALSE(strided.is_contiguous());
  for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    const std::vector<Tensor> grads{nograd::to_dtype(big, dtype), nograd::to_dtype(strided, dtype),
                                    random({0}, 43, dtype), random({5}, 44, dtype)};
    for (double p : {2.0, 1.0, 3.0, 0.5, kInf}) {
      const double want = ref_norm_power(grads, p);
      CHECK_MESSAGE(nograd::grad_norm_power(grads, p) == doctest::Approx(want).epsilon(1e-12),
                    dtype_name(dtype) << " p=" << p);
    }
  }
  CHECK(nograd::grad_norm_power({}, 2.0) == 0.0);
}

TEST_CASE("grad_norm_power: NaN anywhere gives NaN, inf gives inf, and the bits do not depend on the thread count") {
  for (double p : {2.0, 1.0, kInf}) {
    Tensor g = random({100000}, 45, DType::f32);
    nograd::fill_(nograd::narrow(g, 0, 99999, 1), std::numeric_limits<double>::quiet_NaN());
    CHECK_MESSAGE(std::isnan(nograd::grad_norm_power({g}, p)), "p=" << p);
    nograd::fill_(nograd::narrow(g, 0, 99999, 1), -std::numeric_limits<double>::infinity());
    CHECK_MESSAGE(std::isinf(nograd::grad_norm_power({g}, p)), "p=" << p);
  }
  const std::vector<Tensor> grads{random({300007}, 46, DType::f32), random({1000}, 47, DType::f32)};
  const int before = omp_get_max_threads();
  std::vector<double> by_threads;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    by_threads.push_back(nograd::grad_norm_power(grads, 2.0));
  }
  omp_set_num_threads(before);
  for (double norm : by_threads) CHECK(std::memcmp(&norm, &by_threads[0], sizeof norm) == 0);
}

TEST_CASE("grad_norm_power: bad arguments") {
  const Tensor g = random({4}, 48, DType::f32);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { nograd::grad_norm_power({g}, 0.0); }) == "grad_norm_power: norm_type must be > 0 or inf, got 0");
  CHECK(message([&] { nograd::grad_norm_power({g}, -kInf); }) ==
        "grad_norm_power: norm_type must be > 0 or inf, got -inf");
  CHECK(message([&] { nograd::grad_norm_power({g, Tensor()}, 2.0); }) == "grad_norm_power: grads[1] is undefined");
  CHECK(message([&] { nograd::grad_norm_power({g, nograd::to_dtype(g, DType::i64)}, 2.0); }) ==
        "grad_norm_power: grads[1] is i64, expected a floating dtype (f64, f32, f16, bf16)");
}
