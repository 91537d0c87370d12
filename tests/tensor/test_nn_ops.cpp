// Raw neural-network ops against plain f64 reference loops: softmax, layer norm, embedding,
// cross-entropy and dropout, each dtype, strided inputs, determinism and every error message.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "accel.h"
#include "kernels/philox.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/views.h"

using namespace accel;
using Vec = std::vector<double>;

namespace {

Tensor randn64(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return randn(shape, gen, DType::f64) * scale;
}

Vec values(const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); }

// Largest |got - want| / (1 + |want|) over all elements.
double max_error(const Vec& got, const Vec& want) {
  REQUIRE(got.size() == want.size());
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    err = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(err, e);
  }
  return err;
}

struct Split {
  int64_t outer = 1, size = 1, inner = 1;
};
Split split_at(const Shape& shape, int64_t dim) {
  Split s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    (i < dim ? s.outer : i == dim ? s.size : s.inner) *= shape[i];
  return s;
}

Vec ref_softmax(const Vec& x, const Shape& shape, int64_t dim, bool log) {
  const Split s = split_at(shape, dim);
  Vec y(x.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t j) { return (o * s.size + j) * s.inner + i; };
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s.size; ++j) mx = std::max(mx, x[at(j)]);
      for (int64_t j = 0; j < s.size; ++j) sum += std::exp(x[at(j)] - mx);
      for (int64_t j = 0; j < s.size; ++j) y[at(j)] = log ? x[at(j)] - mx - std::log(sum) : std::exp(x[at(j)] - mx) / sum;
    }
  return y;
}

// dx = J^T dy with the softmax Jacobian J_kj = d y_k / d x_j written out element by element.
Vec ref_softmax_backward(const Vec& dy, const Vec& x, const Shape& shape, int64_t dim, bool log) {
  const Split s = split_at(shape, dim);
  const Vec p = ref_softmax(x, shape, dim, false);
  Vec dx(x.size(), 0.0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t j) { return (o * s.size + j) * s.inner + i; };
      for (int64_t j = 0; j < s.size; ++j)
        for (int64_t k = 0; k < s.size; ++k) {
          const double delta = j == k ? 1.0 : 0.0;
          const double jac = log ? delta - p[at(j)] : p[at(k)] * (delta - p[at(j)]);
          dx[at(j)] += dy[at(k)] * jac;
        }
    }
  return dx;
}

struct RefLayerNorm {
  Vec out, mean, rstd;
};
RefLayerNorm ref_layer_norm(const Vec& x, int64_t dim, const Vec* w, const Vec* b, double eps) {
  const int64_t rows = static_cast<int64_t>(x.size()) / dim;
  RefLayerNorm r{Vec(x.size()), Vec(rows), Vec(rows)};
  for (int64_t n = 0; n < rows; ++n) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < dim; ++j) mu += x[n * dim + j] / dim;
    for (int64_t j = 0; j < dim; ++j) var += (x[n * dim + j] - mu) * (x[n * dim + j] - mu) / dim;
    r.mean[n] = mu;
    r.rstd[n] = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < dim; ++j)
      r.out[n * dim + j] = (x[n * dim + j] - mu) * r.rstd[n] * (w ? (*w)[j] : 1.0) + (b ? (*b)[j] : 0.0);
  }
  return r;
}

// Layer-norm grads through the Jacobian d y_k / d x_j = w_k rstd (delta_kj - 1/D - xhat_k xhat_j / D).
struct RefLayerNormGrads {
  Vec dx, dw, db;
};
RefLayerNormGrads ref_layer_norm_backward(const Vec& dy, const Vec& x, int64_t dim, const Vec& w, double eps) {
  const int64_t rows = static_cast<int64_t>(x.size()) / dim;
  const RefLayerNorm f = ref_layer_norm(x, dim, nullptr, nullptr, eps);  // xhat
  RefLayerNormGrads g{Vec(x.size(), 0.0), Vec(dim, 0.0), Vec(dim, 0.0)};
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < dim; ++k) {
      const double xk = f.out[n * dim + k], dyk = dy[n * dim + k];
      g.dw[k] += dyk * xk;
      g.db[k] += dyk;
      for (int64_t j = 0; j < dim; ++j) {
        const double jac = w[k] * f.rstd[n] * ((j == k ? 1.0 : 0.0) - 1.0 / dim - xk * f.out[n * dim + j] / dim);
        g.dx[n * dim + j] += dyk * jac;
      }
    }
  return g;
}

// Per-row -log softmax(x)[t], 0 where ignored.
Vec ref_ce_rows(const Vec& x, int64_t classes, const std::vector<int64_t>& target, int64_t ignore) {
  const Vec ls = ref_softmax(x, {static_cast<int64_t>(target.size()), classes}, 1, true);
  Vec loss(target.size(), 0.0);
  for (size_t n = 0; n < target.size(); ++n)
    if (target[n] != ignore) loss[n] = -ls[n * classes + target[n]];
  return loss;
}

}  // namespace

TEST_CASE("softmax and log_softmax match an f64 reference over every dim, for odd and strided inputs") {
  const Shape shape{3, 5, 7};
  const Tensor x = randn64(shape, 1, 3.0);
  // The same values laid out transposed: a strided input.
  const Tensor strided = nograd::transpose(nograd::contiguous(nograd::transpose(x, 0, 2)), 0, 2);
  REQUIRE_FALSE(strided.is_contiguous());
  for (int64_t dim : {0, 1, 2, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    for (bool log : {false, true}) {
      const Vec want = ref_softmax(values(x), shape, d, log);
      for (const Tensor& in : {x, strided}) {
        const Tensor y = log ? nograd::log_softmax(in, dim) : nograd::softmax(in, dim);
        CHECK(y.dtype() == DType::f64);
        CHECK(y.shape() == shape);
        CHECK_MESSAGE(max_error(values(y), want) < 1e-14, "dim ", dim, " log ", log);
      }
      const Tensor x32 = nograd::to_dtype(x, DType::f32);
      const Vec want32 = ref_softmax(values(x32), shape, d, log);
      const Tensor y32 = log ? nograd::log_softmax(x32, dim) : nograd::softmax(x32, dim);
      CHECK(y32.dtype() == DType::f32);
      CHECK_MESSAGE(max_error(values(y32), want32) < 2e-6, "f32 dim ", dim, " log ", log);
    }
  }
}

TEST_CASE("softmax subtracts the row max: huge logits stay finite, and a 0-d tensor gives 1") {
  const Tensor x = from_vector<float>({1000.0f, 1001.0f, -1000.0f, 88.0f, 89.0f, 90.0f}, {2, 3});
  const Vec y = values(nograd::softmax(x, 1));
  const double e = std::exp(1.0);
  CHECK(y[0] == doctest::Approx(1 / (1 + e)));
  CHECK(y[1] == doctest::Approx(e / (1 + e)));
  CHECK(y[2] == 0.0);
  CHECK(y[5] == doctest::Approx(1 / (1 + 1 / e + 1 / (e * e))));
  CHECK(values(nograd::log_softmax(x, 1))[2] == doctest::Approx(-2001.0 - std::log1p(std::exp(-1.0))));
  CHECK(nograd::softmax(scalar_tensor(5.0), 0).item() == 1.0);
}

TEST_CASE("softmax on large inputs (threaded, inner-dim blocks) agrees with the reference") {
  const Shape shape{37, 1100};
  const Tensor x = nograd::to_dtype(randn64(shape, 2, 2.0), DType::f32);
  for (int64_t dim : {0, 1}) {
    const Vec want = ref_softmax(values(x), shape, dim, false);
    CHECK(max_error(values(nograd::softmax(x, dim)), want) < 2e-6);
  }
}

TEST_CASE("softmax_backward and log_softmax_backward equal the Jacobian-vector product") {
  const Shape shape{4, 3, 6};
  const Tensor x = randn64(shape, 3, 2.0), dy = randn64(shape, 4);
  for (int64_t dim : {0, 1, 2}) {
    for (bool log : {false, true}) {
      const Tensor y = log ? nograd::log_softmax(x, dim) : nograd::softmax(x, dim);
      const Vec want = ref_softmax_backward(values(dy), values(x), shape, dim, log);
      // Strided grad_out on purpose.
      const Tensor dy_strided = nograd::transpose(nograd::contiguous(nograd::transpose(dy, 0, 1)), 0, 1);
      const Tensor dx = log ? nograd::log_softmax_backward(dy_strided, y, dim) : nograd::softmax_backward(dy_strided, y, dim);
      CHECK_MESSAGE(max_error(values(dx), want) < 1e-13, "dim ", dim, " log ", log);

      const Tensor x32 = nograd::to_dtype(x, DType::f32), dy32 = nograd::to_dtype(dy, DType::f32);
      const Tensor y32 = log ? nograd::log_softmax(x32, dim) : nograd::softmax(x32, dim);
      const Tensor dx32 = log ? nograd::log_softmax_backward(dy32, y32, dim) : nograd::softmax_backward(dy32, y32, dim);
      const Vec want32 = ref_softmax_backward(values(dy32), values(x32), shape, dim, log);
      CHECK_MESSAGE(max_error(values(dx32), want32) < 1e-5, "f32 dim ", dim, " log ", log);
    }
  }
}

TEST_CASE("layer_norm matches the reference with and without weight and bias, for strided input") {
  const int64_t dim = 13;
  const Shape shape{3, 7, dim};
  const Tensor x = randn64(shape, 5, 2.0) + 1.5;
  const Tensor w = randn64({dim}, 6), b = randn64({dim}, 7);
  const Vec wv = values(w), bv = values(b);
  const double eps = 1e-5;
  for (int variant = 0; variant < 4; ++variant) {
    const Tensor wt = variant & 1 ? w : Tensor(), bt = variant & 2 ? b : Tensor();
    const RefLayerNorm want = ref_layer_norm(values(x), dim, wt.defined() ? &wv : nullptr, bt.defined() ? &bv : nullptr, eps);
    const nograd::LayerNormResult r = nograd::layer_norm(x, wt, bt, eps);
    CHECK(r.out.shape() == shape);
    CHECK(r.mean.shape() == Shape{3, 7});
    CHECK(r.rstd.dtype() == DType::f64);
    CHECK_MESSAGE(max_error(values(r.out), want.out) < 1e-13, "variant ", variant);
    CHECK(max_error(values(r.mean), want.mean) < 1e-14);
    CHECK(max_error(values(r.rstd), want.rstd) < 1e-13);
  }
  // A strided x: normalise over a dim that is not contiguous in memory.
  const Tensor xt = nograd::transpose(nograd::contiguous(nograd::transpose(x, 1, 2)), 1, 2);
  REQUIRE_FALSE(xt.is_contiguous());
  CHECK(max_error(values(nograd::layer_norm(xt, w, b, eps).out), ref_layer_norm(values(x), dim, &wv, &bv, eps).out) < 1e-13);
  // f32 with f32 stats.
  const Tensor x32 = nograd::to_dtype(x, DType::f32);
  const nograd::LayerNormResult r32 = nograd::layer_norm(x32, nograd::to_dtype(w, DType::f32), nograd::to_dtype(b, DType::f32), eps);
  CHECK(r32.mean.dtype() == DType::f32);
  const Vec w32 = values(nograd::to_dtype(w, DType::f32)), b32 = values(nograd::to_dtype(b, DType::f32));
  CHECK(max_error(values(r32.out), ref_layer_norm(values(x32), dim, &w32, &b32, eps).out) < 1e-5);
}

TEST_CASE("layer_norm_backward equals the Jacobian reference, and its column sums do not depend on threads") {
  const int64_t dim = 9;
  const Tensor x = randn64({5, 2, dim}, 8, 1.5), dy = randn64({5, 2, dim}, 9);
  const Tensor w = randn64({dim}, 10), b = randn64({dim}, 11);
  const double eps = 1e-5;
  const nograd::LayerNormResult r = nograd::layer_norm(x, w, b, eps);
  const RefLayerNormGrads want = ref_layer_norm_backward(values(dy), values(x), dim, values(w), eps);
  const nograd::LayerNormGrads g = nograd::layer_norm_backward(dy, x, r.mean, r.rstd, w, b);
  CHECK(max_error(values(g.grad_input), want.dx) < 1e-12);
  CHECK(max_error(values(g.grad_weight), want.dw) < 1e-12);
  CHECK(max_error(values(g.grad_bias), want.db) < 1e-12);
  // Without weight: dx uses w = 1 and no weight/bias grads come back.
  const nograd::LayerNormResult r0 = nograd::layer_norm(x, Tensor(), Tensor(), eps);
  const nograd::LayerNormGrads g0 = nograd::layer_norm_backward(dy, x, r0.mean, r0.rstd, Tensor(), Tensor());
  CHECK_FALSE(g0.grad_weight.defined());
  CHECK_FALSE(g0.grad_bias.defined());
  CHECK(max_error(values(g0.grad_input), ref_layer_norm_backward(values(dy), values(x), dim, Vec(dim, 1.0), eps).dx) < 1e-12);

  // Many rows: several row blocks, threaded. The f32 sums must be bit-identical for 1 and 2 threads.
  const Tensor xb = nograd::to_dtype(randn64({4001, 12}, 12), DType::f32), dyb = nograd::to_dtype(randn64({4001, 12}, 13), DType::f32);
  const Tensor wb = nograd::to_dtype(randn64({12}, 14), DType::f32);
  const nograd::LayerNormResult rb = nograd::layer_norm(xb, wb, wb, eps);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const nograd::LayerNormGrads one = nograd::layer_norm_backward(dyb, xb, rb.mean, rb.rstd, wb, wb);
  omp_set_num_threads(2);
  const nograd::LayerNormGrads two = nograd::layer_norm_backward(dyb, xb, rb.mean, rb.rstd, wb, wb);
  omp_set_num_threads(threads);
  CHECK(one.grad_weight.to_vector<float>() == two.grad_weight.to_vector<float>());
  CHECK(one.grad_bias.to_vector<float>() == two.grad_bias.to_vector<float>());
  CHECK(one.grad_input.to_vector<float>() == two.grad_input.to_vector<float>());
  const RefLayerNormGrads wantb = ref_layer_norm_backward(values(dyb), values(xb), 12, values(wb), eps);
  CHECK(max_error(values(one.grad_weight), wantb.dw) < 1e-4);
  CHECK(max_error(values(one.grad_bias), wantb.db) < 1e-4);
  CHECK(max_error(values(one.grad_input), wantb.dx) < 1e-4);
}

TEST_CASE("embedding gathers rows for i64 and i32 indices of any shape, from a strided weight") {
  const Tensor weight = randn64({5, 3}, 15);
  const std::vector<int64_t> idx{4, 0, 4, 2, 1, 0};
  const Vec wv = values(weight);
  for (DType index_dtype : {DType::i64, DType::i32}) {
    const Tensor indices = nograd::to_dtype(from_vector<int64_t>(idx, {2, 3}), index_dtype);
    const Tensor out = nograd::embedding(weight, indices);
    CHECK(out.shape() == Shape{2, 3, 3});
    const Vec ov = values(out);
    for (size_t i = 0; i < idx.size(); ++i)
      for (size_t j = 0; j < 3; ++j) CHECK(ov[i * 3 + j] == wv[idx[i] * 3 + j]);
  }
  const Tensor wt = nograd::transpose(nograd::contiguous(nograd::transpose(weight, 0, 1)), 0, 1);
  REQUIRE_FALSE(wt.is_contiguous());
  CHECK(values(nograd::embedding(wt, from_vector<int64_t>({3}))) == Vec(wv.begin() + 9, wv.begin() + 12));
  // Scalar indices give one row; f16 rows are copied bit for bit.
  CHECK(nograd::embedding(weight, scalar_tensor(1.0, DType::i64)).shape() == Shape{3});
  const Tensor w16 = nograd::to_dtype(weight, DType::f16);
  CHECK(values(nograd::embedding(w16, from_vector<int32_t>({2}))) == values(nograd::narrow(w16, 0, 2, 1)));
}

TEST_CASE("embedding_backward sums repeated indices in position order, whatever the thread count") {
  const std::vector<int64_t> idx{1, 3, 1, 1, 0, 3};
  const Tensor indices = from_vector<int64_t>(idx, {3, 2});
  const Tensor grad = randn64({3, 2, 4}, 16);
  const Vec gv = values(grad);
  const Tensor gw = nograd::embedding_backward(grad, indices, 5);
  CHECK(gw.shape() == Shape{5, 4});
  Vec want(20, 0.0);
  for (size_t i = 0; i < idx.size(); ++i)
    for (size_t j = 0; j < 4; ++j) want[idx[i] * 4 + j] += gv[i * 4 + j];
  CHECK(values(gw) == want);  // f64: the same additions in the same order
  CHECK(values(nograd::embedding_backward(grad, nograd::to_dtype(indices, DType::i32), 5)) == want);

  // Large and threaded, f32: equal bit for bit to a sequential float loop in position order.
  const int64_t n = 30000, rows = 37, dim = 8;
  Generator gen(17);
  const Tensor big_idx = nograd::to_dtype(nograd::mul(rand({n}, gen, DType::f64), static_cast<double>(rows)), DType::i64);
  const Tensor big_grad = randn({n, dim}, gen);
  const auto iv = big_idx.to_vector<int64_t>();
  const auto bg = big_grad.to_vector<float>();
  std::vector<float> seq(rows * dim, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) seq[iv[i] * dim + j] += bg[i * dim + j];
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  CHECK(nograd::embedding_backward(big_grad, big_idx, rows).to_vector<float>() == seq);
  omp_set_num_threads(1);
  CHECK(nograd::embedding_backward(big_grad, big_idx, rows).to_vector<float>() == seq);
  omp_set_num_threads(threads);
}

TEST_CASE("cross_entropy matches the reference for each reduction, with ignore_index and i32 targets") {
  const int64_t rows = 7, classes = 5;
  const Tensor logits = randn64({rows, classes}, 18, 3.0);
  const std::vector<int64_t> target{2, -100, 0, 4, 4, -100, 1};
  const Vec per_row = ref_ce_rows(values(logits), classes, target, -100);
  double total = 0;
  for (double v : per_row) total += v;
  for (DType td : {DType::i64, DType::i32}) {
    const Tensor t = nograd::to_dtype(from_vector<int64_t>(target), td);
    const Tensor none = nograd::cross_entropy(logits, t, -100, nograd::Reduction::none);
    CHECK(none.shape() == Shape{rows});
    CHECK(none.dtype() == DType::f64);
    CHECK(max_error(values(none), per_row) < 1e-14);
    const Tensor mean = nograd::cross_entropy(logits, t);
    CHECK(mean.dim() == 0);
    CHECK(mean.item() == doctest::Approx(total / 5).epsilon(1e-14));  // 5 rows are not ignored
    CHECK(nograd::cross_entropy(logits, t, -100, nograd::Reduction::sum).item() == doctest::Approx(total).epsilon(1e-14));
  }
  // A custom ignore_index, and a strided (transposed) logits tensor.
  const Tensor lt = nograd::transpose(nograd::contiguous(nograd::transpose(logits, 0, 1)), 0, 1);
  const std::vector<int64_t> t2{2, 1, 0, 4, 4, 3, 1};
  const Vec rows2 = ref_ce_rows(values(logits), classes, t2, 4);
  CHECK(max_error(values(nograd::cross_entropy(lt, from_vector<int64_t>(t2), 4, nograd::Reduction::none)), rows2) < 1e-14);
  double total2 = 0;
  for (double v : rows2) total2 += v;
  CHECK(nograd::cross_entropy(lt, from_vector<int64_t>(t2), 4).item() == doctest::Approx(total2 / 5).epsilon(1e-14));
  // Large enough for the threaded path.
  const Tensor big = nograd::to_dtype(randn64({301, 130}, 28, 2.0), DType::f32);
  std::vector<int64_t> big_target(301);
  for (int64_t n = 0; n < 301; ++n) big_target[n] = n % 7 == 0 ? -100 : (n * 37) % 130;
  const Tensor bt = from_vector<int64_t>(big_target);
  CHECK(max_error(values(nograd::cross_entropy(big, bt, -100, nograd::Reduction::none)),
                  ref_ce_rows(values(big), 130, big_target, -100)) < 2e-6);
  const Tensor big_grad = nograd::cross_entropy_backward(scalar_tensor(1.0), big, bt, -100, nograd::Reduction::sum);
  const Vec pb = ref_softmax(values(big), {301, 130}, 1, false);
  Vec want_big(pb.size(), 0.0);
  for (int64_t n = 0; n < 301; ++n)
    if (big_target[n] != -100)
      for (int64_t j = 0; j < 130; ++j) want_big[n * 130 + j] = pb[n * 130 + j] - (j == big_target[n]);
  CHECK(max_error(values(big_grad), want_big) < 1e-6);
  // f32 logits give an f32 loss.
  const Tensor l32 = nograd::to_dtype(logits, DType::f32);
  const Tensor loss32 = nograd::cross_entropy(l32, from_vector<int64_t>(t2), 4, nograd::Reduction::none);
  CHECK(loss32.dtype() == DType::f32);
  CHECK(max_error(values(loss32), ref_ce_rows(values(l32), classes, t2, 4)) < 1e-6);
}

TEST_CASE("cross_entropy with every target ignored: mean and sum are 0, not NaN, and the grad is 0") {
  const Tensor logits = randn64({3, 4}, 19);
  const Tensor target = from_vector<int64_t>({-1, -1, -1});
  for (auto reduction : {nograd::Reduction::mean, nograd::Reduction::sum}) {
    const Tensor loss = nograd::cross_entropy(logits, target, -1, reduction);
    CHECK(loss.item() == 0.0);
    const Tensor g = nograd::cross_entropy_backward(scalar_tensor(1.0, DType::f64), logits, target, -1, reduction);
    CHECK(values(g) == Vec(12, 0.0));
  }
  CHECK(values(nograd::cross_entropy(logits, target, -1, nograd::Reduction::none)) == Vec(3, 0.0));
  // No rows at all is the same case.
  CHECK(nograd::cross_entropy(zeros({0, 4}), zeros({0}, DType::i64)).item() == 0.0);
}

TEST_CASE("cross_entropy_backward is (softmax - onehot) times the row's share of grad_loss") {
  const int64_t rows = 6, classes = 4;
  const Tensor logits = randn64({rows, classes}, 20, 2.0);
  const std::vector<int64_t> target{3, 0, 7, 2, 7, 1};  // 7 is ignored
  const Tensor t = from_vector<int64_t>(target);
  const Vec p = ref_softmax(values(logits), {rows, classes}, 1, false);
  auto want = [&](auto row_scale) {
    Vec g(rows * classes, 0.0);
    for (int64_t n = 0; n < rows; ++n)
      if (target[n] != 7)
        for (int64_t j = 0; j < classes; ++j) g[n * classes + j] = row_scale(n) * (p[n * classes + j] - (j == target[n]));
    return g;
  };
  const Tensor gl = randn64({rows}, 21);
  const Vec glv = values(gl);
  CHECK(max_error(values(nograd::cross_entropy_backward(gl, logits, t, 7, nograd::Reduction::none)),
                  want([&](int64_t n) { return glv[n]; })) < 1e-14);
  const Tensor g2 = scalar_tensor(2.5, DType::f64);
  CHECK(max_error(values(nograd::cross_entropy_backward(g2, logits, t, 7, nograd::Reduction::sum)),
                  want([](int64_t) { return 2.5; })) < 1e-14);
  CHECK(max_error(values(nograd::cross_entropy_backward(g2, logits, t, 7, nograd::Reduction::mean)),
                  want([](int64_t) { return 2.5 / 4; })) < 1e-14);
  // f32 logits take an f32 grad_loss and return f32 grads.
  const Tensor l32 = nograd::to_dtype(logits, DType::f32);
  const Tensor d32 = nograd::cross_entropy_backward(scalar_tensor(2.5), l32, t, 7, nograd::Reduction::mean);
  CHECK(d32.dtype() == DType::f32);
  CHECK(max_error(values(d32), want([](int64_t) { return 2.5 / 4; })) < 1e-6);
}

TEST_CASE("f16 and bf16 read and write 16 bits and stay close to the f32 result") {
  const Tensor x = randn64({6, 33}, 22, 2.0);
  const Tensor w = randn64({33}, 23), b = randn64({33}, 24);
  const Tensor t = from_vector<int64_t>({0, 32, 5, -100, 17, 3});
  for (auto [dtype, tol] : {std::pair{DType::f16, 2e-3}, std::pair{DType::bf16, 1.6e-2}}) {
    INFO(dtype_name(dtype));
    const Tensor xh = nograd::to_dtype(x, dtype), wh = nograd::to_dtype(w, dtype), bh = nograd::to_dtype(b, dtype);
    // The f32 result on the same (16-bit) values.
    const Tensor xf = nograd::to_dtype(xh, DType::f32), wf = nograd::to_dtype(wh, DType::f32), bf = nograd::to_dtype(bh, DType::f32);
    for (int64_t dim : {0, 1}) {
      const Tensor s = nograd::softmax(xh, dim);
      CHECK(s.dtype() == dtype);
      CHECK(max_error(values(s), values(nograd::softmax(xf, dim))) < tol);
      CHECK(max_error(values(nograd::log_softmax(xh, dim)), values(nograd::log_softmax(xf, dim))) < tol);
      const Tensor dy = nograd::to_dtype(x * 0.5, dtype);
      CHECK(max_error(values(nograd::softmax_backward(dy, s, dim)),
                      values(nograd::softmax_backward(nograd::to_dtype(dy, DType::f32), nograd::softmax(xf, dim), dim))) < tol);
    }
    const nograd::LayerNormResult lh = nograd::layer_norm(xh, wh, bh, 1e-5);
    const nograd::LayerNormResult lf = nograd::layer_norm(xf, wf, bf, 1e-5);
    CHECK(lh.out.dtype() == dtype);
    CHECK(lh.mean.dtype() == DType::f32);
    CHECK(max_error(values(lh.mean), values(lf.mean)) < 1e-6);  // f32 stats of the same values
    CHECK(max_error(values(lh.out), values(lf.out)) < 4 * tol);
    const Tensor dyh = nograd::to_dtype(randn64({6, 33}, 25), dtype);
    const nograd::LayerNormGrads gh = nograd::layer_norm_backward(dyh, xh, lh.mean, lh.rstd, wh, bh);
    const nograd::LayerNormGrads gf = nograd::layer_norm_backward(nograd::to_dtype(dyh, DType::f32), xf, lf.mean, lf.rstd, wf, bf);
    CHECK(max_error(values(gh.grad_input), values(gf.grad_input)) < 4 * tol);
    CHECK(max_error(values(gh.grad_weight), values(gf.grad_weight)) < 4 * tol);
    CHECK(max_error(values(gh.grad_bias), values(gf.grad_bias)) < 4 * tol);
    const Tensor ch = nograd::cross_entropy(xh, t, -100, nograd::Reduction::none);
    CHECK(ch.dtype() == DType::f32);
    CHECK(max_error(values(ch), values(nograd::cross_entropy(xf, t, -100, nograd::Reduction::none))) < 1e-5);
    const Tensor gch = nograd::cross_entropy_backward(scalar_tensor(1.0), xh, t);
    CHECK(gch.dtype() == dtype);
    CHECK(max_error(values(gch), values(nograd::cross_entropy_backward(scalar_tensor(1.0), xf, t))) < tol);
    const Tensor idx = from_vector<int64_t>({5, 5, 1});
    const Tensor eg = nograd::to_dtype(randn64({3, 33}, 26), dtype);
    CHECK(max_error(values(nograd::embedding_backward(eg, idx, 6)),
                    values(nograd::embedding_backward(nograd::to_dtype(eg, DType::f32), idx, 6))) < tol);
  }
}

TEST_CASE("dropout: mask is random_uniform_at(seed, offset, i) >= p, kept elements scale by 1/(1-p)") {
  Generator data(27);
  const Tensor x = randn({7, 13}, data);
  Generator gen(99);
  gen.reserve(5);  // a non-zero offset
  const GeneratorState before = gen.state();
  const double p = 0.3;
  const nograd::DropoutResult r = nograd::dropout(x, p, gen);
  CHECK(gen.state().offset == before.offset + uniform_blocks(91));
  CHECK(r.keep_mask.dtype() == DType::boolean);
  const auto mask = r.keep_mask.to_vector<bool>();
  const auto out = r.out.to_vector<float>(), xv = x.to_vector<float>();
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  int mismatches = 0;
  for (uint64_t i = 0; i < 91; ++i) {
    const bool keep = random_uniform_at(before.seed, before.offset, i) >= static_cast<float>(p);
    mismatches += mask[i] != keep;
    mismatches += out[i] != (keep ? xv[i] * scale : 0.0f);
  }
  CHECK(mismatches == 0);
  // The same generator state draws the same mask; the next call draws a different one.
  gen.set_state(before);
  const nograd::DropoutResult again = nograd::dropout(x, p, gen);
  CHECK(again.keep_mask.to_vector<bool>() == mask);
  CHECK(again.out.to_vector<float>() == out);
  CHECK(nograd::dropout(x, p, gen).keep_mask.to_vector<bool>() != mask);
}

TEST_CASE("dropout keeps about 1 - p of a large tensor, indexes strided input row-major, and handles p = 0 and 1") {
  const int64_t n = 200000;
  Generator gen(5);
  const Tensor x = ones({n});
  for (double p : {0.1, 0.5, 0.9}) {
    const nograd::DropoutResult r = nograd::dropout(x, p, gen);
    const auto mask = r.keep_mask.to_vector<bool>();
    const double kept = static_cast<double>(std::count(mask.begin(), mask.end(), true)) / n;
    CHECK(std::abs(kept - (1 - p)) < 0.005);  // ~5 sigma
    // The mean of the scaled output stays ~1.
    double mean = 0;
    for (float v : r.out.to_vector<float>()) mean += v / n;
    CHECK(std::abs(mean - 1.0) < 0.02);
  }
  // A transposed input: element i is the i-th in row-major order of the logical shape.
  Generator data(6);
  const Tensor base = randn({4, 9}, data);
  const Tensor xt = nograd::transpose(base, 0, 1);
  Generator g1(8), g2(8);
  const nograd::DropoutResult rt = nograd::dropout(xt, 0.4, g1);
  const nograd::DropoutResult rc = nograd::dropout(nograd::contiguous(xt), 0.4, g2);
  CHECK(rt.out.shape() == Shape{9, 4});
  CHECK(rt.keep_mask.to_vector<bool>() == rc.keep_mask.to_vector<bool>());
  CHECK(rt.out.to_vector<float>() == rc.out.to_vector<float>());
  // p = 0 returns x itself with an all-true mask; p = 1 gives zeros; both still advance the generator.
  Generator g(3);
  const nograd::DropoutResult keep_all = nograd::dropout(base, 0.0, g);
  CHECK(keep_all.out.is_same(base));
  CHECK(keep_all.keep_mask.to_vector<bool>() == std::vector<bool>(36, true));
  CHECK(g.state().offset == uniform_blocks(36));
  const nograd::DropoutResult drop_all = nograd::dropout(base, 1.0, g);
  CHECK(drop_all.out.to_vector<float>() == std::vector<float>(36, 0.0f));
  CHECK(drop_all.keep_mask.to_vector<bool>() == std::vector<bool>(36, false));
  // Halves: the same mask as f32, and the kept values rounded once.
  Generator h1(11), h2(11);
  const Tensor bh = nograd::to_dtype(base, DType::bf16);
  const nograd::DropoutResult rh = nograd::dropout(bh, 0.25, h1);
  const nograd::DropoutResult rf = nograd::dropout(nograd::to_dtype(bh, DType::f32), 0.25, h2);
  CHECK(rh.keep_mask.to_vector<bool>() == rf.keep_mask.to_vector<bool>());
  CHECK(values(rh.out) == values(nograd::to_dtype(rf.out, DType::bf16)));
}

TEST_CASE("nn op errors name the op, the values and what was expected") {
  const Tensor x = zeros({2, 5});
  const Tensor i64 = zeros({2}, DType::i64);

  CHECK_THROWS_WITH_AS(nograd::softmax(Tensor(), 0), "softmax: x is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax(i64, 0), "softmax: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::log_softmax(x, 2), "log_softmax: dim 2 out of range for a tensor of rank 2 (expected -2..1)", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax_backward(Tensor(), x, 1), "softmax_backward: grad_out is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax_backward(x, Tensor(), 1), "softmax_backward: out is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax_backward(zeros({2, 5}, DType::i64), zeros({2, 5}, DType::i64), 1),
                       "softmax_backward: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::log_softmax_backward(zeros({2, 5}, DType::f64), x, 1),
                       "log_softmax_backward: grad_out is f64 but out is f32; they must match", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax_backward(zeros({5, 2}), x, 1),
                       "softmax_backward: grad_out [5, 2] and out [2, 5] differ in shape", Error);
  CHECK_THROWS_WITH_AS(nograd::softmax_backward(x, x, -3),
                       "softmax_backward: dim -3 out of range for a tensor of rank 2 (expected -2..1)", Error);

  CHECK_THROWS_WITH_AS(nograd::layer_norm(Tensor(), Tensor(), Tensor(), 1e-5), "layer_norm: x is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(zeros({2, 5}, DType::i32), Tensor(), Tensor(), 1e-5),
                       "layer_norm: unsupported dtype i32, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(scalar_tensor(1.0), Tensor(), Tensor(), 1e-5),
                       "layer_norm: x must have at least one dim, got a 0-d tensor", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(zeros({2, 0}), Tensor(), Tensor(), 1e-5),
                       "layer_norm: the last dim of x [2, 0] is empty; there is nothing to normalise", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(x, zeros({4}), Tensor(), 1e-5),
                       "layer_norm: weight has shape [4], expected [5] (the last dim of x [2, 5])", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(x, Tensor(), zeros({1, 5}), 1e-5),
                       "layer_norm: bias has shape [1, 5], expected [5] (the last dim of x [2, 5])", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(x, zeros({5}, DType::f64), Tensor(), 1e-5),
                       "layer_norm: weight is f64 but x is f32; they must match", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm(x, Tensor(), Tensor(), -1.0), "layer_norm: eps must be >= 0, got -1", Error);

  const nograd::LayerNormResult ln = nograd::layer_norm(x, Tensor(), Tensor(), 1e-5);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(Tensor(), x, ln.mean, ln.rstd, Tensor(), Tensor()),
                       "layer_norm_backward: grad_out is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(x, x, Tensor(), ln.rstd, Tensor(), Tensor()),
                       "layer_norm_backward: mean is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(x, x, ln.mean, Tensor(), Tensor(), Tensor()),
                       "layer_norm_backward: rstd is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(zeros({2, 4}), x, ln.mean, ln.rstd, Tensor(), Tensor()),
                       "layer_norm_backward: grad_out has shape [2, 4], expected [2, 5] (the shape of x)", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(zeros({2, 5}, DType::f16), x, ln.mean, ln.rstd, Tensor(), Tensor()),
                       "layer_norm_backward: grad_out is f16 but x is f32; they must match", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(x, x, zeros({3}), ln.rstd, Tensor(), Tensor()),
                       "layer_norm_backward: mean has shape [3], expected [2] (x's shape without its last dim)", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(x, x, ln.mean, zeros({2}, DType::f64), Tensor(), Tensor()),
                       "layer_norm_backward: rstd is f64, expected f32 for f32 x", Error);
  CHECK_THROWS_WITH_AS(nograd::layer_norm_backward(x, x, ln.mean, ln.rstd, Tensor(), zeros({6})),
                       "layer_norm_backward: bias has shape [6], expected [5] (the last dim of x [2, 5])", Error);

  const Tensor weight = zeros({5, 3});
  CHECK_THROWS_WITH_AS(nograd::embedding(Tensor(), i64), "embedding: weight is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding(weight, Tensor()), "embedding: indices is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding(zeros({5}), i64), "embedding: weight must be 2-d [num, dim], got [5]", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding(weight, zeros({2})), "embedding: indices must be i64 or i32, got f32", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding(weight, from_vector<int64_t>({0, 4, 5})),
                       "embedding: indices[2] = 5 is out of range for 5 rows (weight [5, 3])", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding(weight, from_vector<int32_t>({-1})),
                       "embedding: indices[0] = -1 is out of range for 5 rows (weight [5, 3])", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(Tensor(), i64, 5), "embedding_backward: grad_out is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}), Tensor(), 5), "embedding_backward: indices is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}, DType::i64), i64, 5),
                       "embedding_backward: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}), zeros({2}, DType::boolean), 5),
                       "embedding_backward: indices must be i64 or i32, got bool", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}), i64, -1), "embedding_backward: num_weights must be >= 0, got -1", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}), zeros({3}, DType::i64), 5),
                       "embedding_backward: grad_out [2, 3] must be the indices' shape [3] plus one trailing dim", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2}), i64, 5),
                       "embedding_backward: grad_out [2] must be the indices' shape [2] plus one trailing dim", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(zeros({2, 3}), from_vector<int64_t>({1, 7}), 5),
                       "embedding_backward: indices[1] = 7 is out of range for 5 rows (weight [5, 3])", Error);

  CHECK_THROWS_WITH_AS(nograd::cross_entropy(Tensor(), i64), "cross_entropy: logits is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(x, Tensor()), "cross_entropy: target is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(zeros({2, 5}, DType::i64), i64),
                       "cross_entropy: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(zeros({6}), i64), "cross_entropy: logits must be 2-d [N, C], got [6]", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(zeros({2, 0}), i64), "cross_entropy: logits [2, 0] have no classes", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(x, zeros({2})), "cross_entropy: target must be i64 or i32, got f32", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(x, zeros({3}, DType::i64)),
                       "cross_entropy: target has shape [3], expected [2] (one class per row of logits [2, 5])", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(x, from_vector<int64_t>({0, 5})),
                       "cross_entropy: target[1] = 5 is out of range for 5 classes (ignore_index is -100)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy(x, from_vector<int32_t>({-100, -1})),
                       "cross_entropy: target[1] = -1 is out of range for 5 classes (ignore_index is -100)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(Tensor(), x, i64), "cross_entropy_backward: grad_loss is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(scalar_tensor(1.0), zeros({6}), i64),
                       "cross_entropy_backward: logits must be 2-d [N, C], got [6]", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(zeros({2}), x, i64),
                       "cross_entropy_backward: grad_loss has shape [2], expected [] for reduction mean", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(scalar_tensor(1.0), x, i64, -100, nograd::Reduction::none),
                       "cross_entropy_backward: grad_loss has shape [], expected [2] for reduction none", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(scalar_tensor(1.0, DType::f64), zeros({2, 5}, DType::f16), i64),
                       "cross_entropy_backward: grad_loss is f64, expected f32 (the loss dtype for f16 logits)", Error);
  CHECK_THROWS_WITH_AS(nograd::cross_entropy_backward(scalar_tensor(1.0), x, from_vector<int64_t>({9, 0}), -100, nograd::Reduction::sum),
                       "cross_entropy_backward: target[0] = 9 is out of range for 5 classes (ignore_index is -100)", Error);

  Generator gen(1);
  CHECK_THROWS_WITH_AS(nograd::dropout(Tensor(), 0.5, gen), "dropout: x is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::dropout(i64, 0.5, gen), "dropout: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::dropout(x, 1.5, gen), "dropout: p must be in [0, 1], got 1.5", Error);
  CHECK_THROWS_WITH_AS(nograd::dropout(x, -0.1, gen), "dropout: p must be in [0, 1], got -0.1", Error);
  CHECK_THROWS_WITH_AS(nograd::dropout(x, std::nan(""), gen), "dropout: p must be in [0, 1], got nan", Error);
  CHECK(gen.state().offset == 0);  // a rejected call draws nothing
}
