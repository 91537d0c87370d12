// The single-input layers and the losses against reference computations written out in loops.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"

using namespace accel;
using namespace accel::nn;

namespace {

std::vector<double> as_f64(const Tensor& t) { return contiguous(to(t, DType::f64)).to_vector<double>(); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol, "element " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

TEST_CASE("Linear computes x W^T + b over the last dim, with weights in U(-1/sqrt(in), 1/sqrt(in))") {
  Generator gen(10);
  Linear lin(5, 3, true, gen);
  CHECK(lin.weight().shape() == Shape{3, 5});
  CHECK(lin.bias().shape() == Shape{3});
  const double bound = 1.0 / std::sqrt(5.0);
  for (double w : as_f64(lin.weight())) CHECK(std::abs(w) <= bound);
  for (double b : as_f64(lin.bias())) CHECK(std::abs(b) <= bound);

  const Tensor x = randn({2, 4, 5}, gen);
  const Tensor y = lin(x);
  CHECK(y.shape() == Shape{2, 4, 3});
  const auto xv = as_f64(x), w = as_f64(lin.weight()), b = as_f64(lin.bias());
  std::vector<double> want;
  for (int r = 0; r < 8; ++r)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int i = 0; i < 5; ++i) acc += xv[r * 5 + i] * w[o * 5 + i];
      want.push_back(acc);
    }
  check_close(as_f64(y), want, 1e-5);

  Linear no_bias(5, 3, false, gen);
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK_THROWS_WITH_AS(lin(ones({2, 4})), "linear: input [2, 4] does not end in in_features 5 of weight [3, 5]", Error);
}

TEST_CASE("LayerNorm normalises the last dim with biased variance, then scales and shifts") {
  Generator gen(11);
  LayerNorm ln(4, 1e-5);
  CHECK(as_f64(ln.weight()) == std::vector<double>(4, 1.0));
  CHECK(as_f64(ln.bias()) == std::vector<double>(4, 0.0));
  init::normal_(ln.weight(), 1.0, 0.5, gen);
  init::normal_(ln.bias(), 0.0, 0.5, gen);
  const Tensor x = randn({3, 4}, gen) * 3.0 + 1.0;
  const auto xv = as_f64(x), w = as_f64(ln.weight()), b = as_f64(ln.bias());
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += xv[r * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) var += (xv[r * 4 + i] - mean) * (xv[r * 4 + i] - mean) / 4;
    for (int i = 0; i < 4; ++i) want.push_back((xv[r * 4 + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i]);
  }
  check_close(as_f64(ln(x)), want, 1e-5);
  CHECK_THROWS_WITH_AS(ln(ones({3, 5})), "LayerNorm: input [3, 5] does not end in dim 4", Error);
}

TEST_CASE("Embedding picks rows; its N(0, init_std^2) init has about that spread") {
  Generator gen(12);
  Embedding emb(6, 3, gen);
  const Tensor idx = from_vector<int64_t>({5, 0, 5, 2}, {2, 2});
  const Tensor out = emb(idx);
  CHECK(out.shape() == Shape{2, 2, 3});
  const auto w = as_f64(emb.weight()), o = as_f64(out);
  const int rows[] = {5, 0, 5, 2};
  for (int r = 0; r < 4; ++r)
    for (int d = 0; d < 3; ++d) CHECK(o[r * 3 + d] == w[rows[r] * 3 + d]);

  Embedding small(1000, 10, gen, 0.02);
  double sq = 0;
  for (double v : as_f64(small.weight())) sq += v * v;
  CHECK(std::sqrt(sq / 10000) == doctest::Approx(0.02).epsilon(0.05));
}

TEST_CASE("Embedding with padding_idx: that row starts at 0 and never gets a grad, as in PyTorch") {
  Generator gen(12), same(12);
  Embedding plain(5, 3, same);
  Embedding emb(5, 3, gen, {.padding_idx = -2});
  CHECK(emb.padding_idx() == 3);
  CHECK_FALSE(plain.padding_idx().has_value());
  const auto w = as_f64(emb.weight()), p = as_f64(plain.weight());
  for (int64_t i = 0; i < 15; ++i) CHECK(w[i] == (i / 3 == 3 ? 0.0 : p[i]));  // the same draws, row 3 zeroed
  const Tensor idx = from_vector<int64_t>({3, 1, 3});
  backward(sum(emb(idx) * 2.0));
  const auto g = as_f64(emb.weight().grad());
  for (int64_t i = 0; i < 15; ++i) CHECK(g[i] == (i / 3 == 1 ? 2.0 : 0.0));
  CHECK_THROWS_WITH_AS(Embedding(5, 3, gen, {.padding_idx = 5}),
                       "Embedding: padding_idx 5 is out of range for 5 rows (expected -5..4)", Error);
  CHECK_THROWS_WITH_AS(Embedding(5, 3, gen, {.padding_idx = -6}),
                       "Embedding: padding_idx -6 is out of range for 5 rows (expected -5..4)", Error);
  Embedding narrow(100, 2, gen, {.init_std = 0.02, .padding_idx = 0});
  for (double v : as_f64(narrow.weight())) CHECK(std::abs(v) < 0.2);
}

TEST_CASE("Dropout drops and rescales only in training mode") {
  Generator gen(13);
  Dropout drop(0.25, gen);
  const Tensor x = ones({4000});
  const auto y = as_f64(drop(x));
  int kept = 0;
  for (double v : y) {
    CHECK((v == 0.0 || std::abs(v - 1.0 / 0.75) < 1e-6));
    kept += v != 0.0;
  }
  CHECK(kept / 4000.0 == doctest::Approx(0.75).epsilon(0.05));
  CHECK(as_f64(drop(x)) != y);  // its stream moves on
  drop.eval();
  CHECK(drop(x).is_same(x));
  Dropout none(0.0, gen);
  CHECK(none(x).is_same(x));
  CHECK_THROWS_WITH_AS(Dropout(1.0, gen), "Dropout: p must be in [0, 1), got 1", Error);
}

TEST_CASE("activations and Sequential chain single-input modules under names 0, 1, ...") {
  Generator gen(14);
  Sequential seq;
  auto lin = seq.push_back(std::make_shared<Linear>(2, 2, true, gen));
  seq.push_back(std::make_shared<ReLU>());
  seq.push_back(std::make_shared<Tanh>());
  seq.push_back(std::make_shared<GELU>());
  CHECK(seq.size() == 4);
  CHECK(seq[1].type_name() == "ReLU");
  std::vector<std::string> names;
  for (const auto& entry : seq.named_parameters()) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias"});

  const Tensor x = randn({3, 2}, gen);
  const auto h = as_f64((*lin)(x));
  std::vector<double> want;
  for (double v : h) {
    const double t = std::tanh(std::max(v, 0.0));
    want.push_back(0.5 * t * (1 + std::tanh(std::sqrt(2 / M_PI) * (t + 0.044715 * t * t * t))));
  }
  check_close(as_f64(seq(x)), want, 1e-6);
  CHECK_THROWS_WITH_AS(seq[4], "Sequential: index 4 out of range for 4 modules", Error);
}

TEST_CASE("causal_mask is true exactly above the diagonal") {
  CHECK(functional::causal_mask(3).to_vector<bool>() ==
        std::vector<bool>{false, true, true, false, false, true, false, false, false});
}

TEST_CASE("mse_loss is the mean squared difference") {
  const Tensor pred = from_vector<double>({1, 2, 3, 4}, {2, 2}), target = from_vector<double>({0, 2, 5, 1}, {2, 2});
  CHECK(mse_loss(pred, target).item() == doctest::Approx((1 + 0 + 4 + 9) / 4.0));
  CHECK_THROWS_WITH_AS(mse_loss(pred, zeros({4}, DType::f64)), "mse_loss: pred [2, 2] and target [4] differ in shape",
                       Error);
}

TEST_CASE("cross_entropy flattens [B, T, C] logits and skips ignored targets") {
  Generator gen(15);
  const Tensor logits = randn({2, 3, 4}, gen, DType::f64);
  const std::vector<int64_t> t{0, 3, -100, 2, 1, 1};
  const Tensor target = from_vector<int64_t>(t, {2, 3});
  const auto l = as_f64(logits);
  std::vector<double> per_position;
  double total = 0;
  int counted = 0;
  for (int r = 0; r < 6; ++r) {
    double norm = 0;
    for (int c = 0; c < 4; ++c) norm += std::exp(l[r * 4 + c]);
    const double loss = t[r] == -100 ? 0.0 : std::log(norm) - l[r * 4 + t[r]];
    per_position.push_back(loss);
    if (t[r] != -100) total += loss, ++counted;
  }
  CHECK(nn::cross_entropy(logits, target).item() == doctest::Approx(total / counted).epsilon(1e-12));
  const Tensor none = nn::cross_entropy(logits, target, -100, Reduction::none);
  CHECK(none.shape() == Shape{2, 3});
  check_close(as_f64(none), per_position, 1e-12);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(logits, zeros({6}, DType::i64)),
                       "cross_entropy: target [6] must be logits [2, 3, 4] without the class dim, i.e. [2, 3]", Error);
}

TEST_CASE("cross_entropy with options on [B, T, C]: weights and smoothing as on the flattened rows") {
  Generator gen(16);
  const Tensor logits = randn({2, 3, 4}, gen, DType::f64);
  const Tensor target = from_vector<int64_t>({0, 3, -100, 2, 1, 1}, {2, 3});
  const CrossEntropyOptions options{.weight = from_vector<double>({1.0, 0.5, 2.0, 1.5}), .reduction = Reduction::none,
                                    .label_smoothing = 0.25};
  const Tensor none = nn::cross_entropy(logits, target, options);
  CHECK(none.shape() == Shape{2, 3});
  check_close(as_f64(none), as_f64(accel::cross_entropy(reshape(logits, {6, 4}), reshape(target, {6}), options)), 0.0);
  CrossEntropyOptions mean = options;
  mean.reduction = Reduction::mean;
  // The mean divides by the counted targets' weights: 1 + 1.5 + 2 + 0.5 + 0.5.
  double total = 0;
  for (double v : as_f64(none)) total += v;
  CHECK(nn::cross_entropy(logits, target, mean).item() == doctest::Approx(total / 5.5).epsilon(1e-12));
  // Documented differences from PyTorch: every target ignored gives 0 (not NaN); f16 logits an f32 loss.
  CHECK(nn::cross_entropy(logits, full({2, 3}, -100, DType::i64), mean).item() == 0.0);
  CHECK(nn::cross_entropy(to(logits, DType::f16), target).dtype() == DType::f32);
}
