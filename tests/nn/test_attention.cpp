// CausalSelfAttention, GPTBlock and GPT: forward against a loop reference, causality, gradcheck in f64,
// and dropout switched by the mode.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"

using namespace accel;
using namespace accel::nn;

namespace {

std::vector<double> as_f64(const Tensor& t) { return contiguous(to(t, DType::f64)).to_vector<double>(); }

// Attention written out per batch, head and position: softmax over u <= t of q_t . k_u / sqrt(D).
std::vector<double> reference_attention(CausalSelfAttention& attn, const Tensor& x_in) {
  const int64_t B = x_in.size(0), T = x_in.size(1), C = attn.n_embd(), H = attn.n_head(), D = C / H;
  const auto x = as_f64(x_in), wq = as_f64(attn.qkv()->weight()), bq = as_f64(attn.qkv()->bias());
  const auto wp = as_f64(attn.proj()->weight()), bp = as_f64(attn.proj()->bias());
  std::vector<double> qkv(B * T * 3 * C), y(B * T * C), out(B * T * C);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = 0; j < 3 * C; ++j) {
      double acc = bq[j];
      for (int64_t c = 0; c < C; ++c) acc += x[r * C + c] * wq[j * C + c];
      qkv[r * 3 * C + j] = acc;
    }
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    return qkv[(b * T + t) * 3 * C + part * C + h * D + d];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> p(t + 1);
        double top = -INFINITY, norm = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += at(b, t, 0, h, d) * at(b, u, 1, h, d);
          p[u] = s / std::sqrt(static_cast<double>(D));
          top = std::max(top, p[u]);
        }
        for (double& v : p) norm += (v = std::exp(v - top));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t u = 0; u <= t; ++u) acc += p[u] / norm * at(b, u, 2, h, d);
          y[(b * T + t) * C + h * D + d] = acc;
        }
      }
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t o = 0; o < C; ++o) {
      double acc = bp[o];
      for (int64_t c = 0; c < C; ++c) acc += y[r * C + c] * wp[o * C + c];
      out[r * C + o] = acc;
    }
  return out;
}

std::vector<Tensor> with_params(const Tensor& x, const Module& m) {
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

}  // namespace

TEST_CASE("CausalSelfAttention matches attention written out in loops") {
  Generator gen(20);
  CausalSelfAttention attn(8, 2, 0.0, gen);
  const Tensor x = randn({2, 5, 8}, gen);
  const Tensor y = attn(x);
  CHECK(y.shape() == Shape{2, 5, 8});
  const auto got = as_f64(y), want = reference_attention(attn, x);
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(1.0));
  CHECK_THROWS_WITH_AS(attn(ones({2, 5, 6})), "CausalSelfAttention: input must be [B, T, 8], got [2, 5, 6]", Error);
  CHECK_THROWS_WITH_AS(CausalSelfAttention(6, 4, 0.0, gen),
                       "CausalSelfAttention: n_embd 6 must be a positive multiple of n_head 4", Error);
}

TEST_CASE("changing a future token leaves earlier outputs unchanged") {
  Generator gen(21);
  GPT gpt({.vocab_size = 7, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8}, gen);
  std::vector<int64_t> tokens{1, 4, 2, 6, 0, 3};
  const auto before = as_f64(gpt(from_vector<int64_t>(tokens, {1, 6})));
  tokens[4] = 5;
  const auto after = as_f64(gpt(from_vector<int64_t>(tokens, {1, 6})));
  REQUIRE(before.size() == 6 * 7);
  for (size_t i = 0; i < 4 * 7; ++i) CHECK(after[i] == doctest::Approx(before[i]).epsilon(1e-6));
  bool later_changed = false;
  for (size_t i = 4 * 7; i < 6 * 7; ++i) later_changed |= std::abs(after[i] - before[i]) > 1e-6;
  CHECK(later_changed);
}

TEST_CASE("GPT maps [B, T] token ids to [B, T, vocab] logits and rejects sequences past block_size") {
  Generator gen(22);
  GPT gpt({.vocab_size = 9, .block_size = 4, .n_layer = 1, .n_head = 2, .n_embd = 8}, gen);
  const Tensor logits = gpt(from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4}));
  CHECK(logits.shape() == Shape{2, 4, 9});
  // GPT-2 init: small weights, so the initial logits are close to uniform.
  for (double v : as_f64(logits)) CHECK(std::abs(v) < 0.5);
  CHECK_THROWS_WITH_AS(gpt(zeros({1, 5}, DType::i64)), "GPT: sequence length 5 exceeds block_size 4", Error);
  CHECK_THROWS_WITH_AS(gpt(zeros({1, 4})), "GPT: idx must be [B, T] of i64 or i32, got Tensor(f32, cpu, [1, 4])",
                       Error);
  // One backward reaches every parameter.
  backward(nn::cross_entropy(logits, from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})));
  for (const auto& [name, p] : gpt.named_parameters()) CHECK_MESSAGE(p.grad().defined(), name);
}

TEST_CASE("gradcheck: CausalSelfAttention in f64, through the input and every parameter") {
  Generator gen(23);
  CausalSelfAttention attn(4, 2, 0.0, gen);
  attn.to(DType::f64);
  const Tensor x = randn({2, 3, 4}, gen, DType::f64).requires_grad_();
  const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return attn(in[0]); }, with_params(x, attn));
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("gradcheck: GPTBlock in f64, through the input and every parameter") {
  Generator gen(24);
  GPTBlock block(4, 2, 0.0, gen);
  block.to(DType::f64);
  const Tensor x = randn({2, 3, 4}, gen, DType::f64).requires_grad_();
  const GradcheckResult r =
      gradcheck([&](const std::vector<Tensor>& in) { return block(in[0]); }, with_params(x, block));
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("attention dropout acts in training mode only") {
  Generator gen(25);
  GPTBlock block(8, 2, 0.5, gen);
  const Tensor x = randn({1, 4, 8}, gen);
  const auto a = as_f64(block(x)), b = as_f64(block(x));
  CHECK(a != b);  // fresh masks each call
  block.eval();
  const auto c = as_f64(block(x)), d = as_f64(block(x));
  CHECK(c == d);
  GPTBlock plain(8, 2, 0.0, gen);
  plain.load_state_dict(block.state_dict());
  CHECK(as_f64(plain(x)) == c);  // eval with dropout = no dropout at all
}
