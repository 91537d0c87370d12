// The fused causal attention against finite differences (f64) and against the ops it replaces
// (matmul, causal_softmax, matmul) in f64, f32 and bf16; its saved log-sum-exp; its independence of
// the thread count; the refusals; and nn's attention taking it on the CPU.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <set>

#include "accel.h"
#include "autograd/node.h"
#include "tensor/nograd/attention.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"

using namespace accel;

namespace {

// q, k, v [B, T, H, D] as the three views of one [B, T, 3 H D] tensor, as a fused qkv projection gives.
std::vector<Tensor> qkv_views(const Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  std::vector<Tensor> parts = split(qkv, C, 2);
  for (Tensor& p : parts) p = reshape(p, {B, T, H, C / H});
  return parts;
}

// The same attention from the separate ops: [B, T, H, D] -> [B, T, H, D].
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  auto by_head = [](const Tensor& t) { return transpose(t, 1, 2); };
  const Tensor att = causal_softmax(matmul(by_head(q), transpose(by_head(k), 2, 3)), scale);
  return transpose(matmul(att, by_head(v)), 1, 2);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return nograd::max(nograd::abs(nograd::sub(nograd::to_dtype(a, DType::f64), nograd::to_dtype(b, DType::f64))))
      .item();
}

double max_abs(const Tensor& a) { return nograd::max(nograd::abs(nograd::to_dtype(a, DType::f64))).item(); }

struct Run {
  Tensor out, gq, gk, gv;
};

// out and the grads of sum(out * w) through f, for fresh leaves of qkv's values.
Run run(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f, const Tensor& qkv_values,
        int64_t H, const Tensor& w) {
  std::vector<Tensor> leaves;
  for (const Tensor& p : qkv_views(qkv_values, H)) leaves.push_back(nograd::clone(p).requires_grad_());
  const Tensor out = f(leaves[0], leaves[1], leaves[2]);
  backward(sum(out * w));
  return {detach(out), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

}  // namespace

TEST_CASE("causal_attention: gradcheck in f64, for one query block and across two, on qkv views") {
  for (const auto& [B, T, H, D] : {std::array<int64_t, 4>{2, 5, 3, 4}, std::array<int64_t, 4>{1, 67, 1, 3}}) {
    INFO("B ", B, " T ", T, " H ", H, " D ", D);
    Generator gen(21);
    const Tensor qkv = randn({B, T, 3 * H * D}, gen, DType::f64).requires_grad_();
    GradcheckOptions options;
    const GradcheckResult r = gradcheck(
        [H = H](const auto& in) {
          const std::vector<Tensor> p = qkv_views(in[0], H);
          return causal_attention(p[0], p[1], p[2], 0.6);
        },
        {qkv}, options);
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("causal_attention equals matmul, causal_softmax and matmul, forward and backward") {
  struct Case {
    DType dtype;
    double out_tol, grad_tol;  // relative to the largest magnitude
  };
  for (const Case c : {Case{DType::f64, 1e-13, 1e-12}, Case{DType::f32, 2e-6, 5e-6}}) {
    INFO(dtype_name(c.dtype));
    const int64_t B = 2, T = 130, H = 3, D = 16;  // 130 queries: three blocks, the last one short
    Generator gen(22);
    const Tensor qkv = randn({B, T, 3 * H * D}, gen, c.dtype);
    const Tensor w = randn({B, T, H, D}, gen, c.dtype);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const Run fused = run([&](auto q, auto k, auto v) { return causal_attention(q, k, v, scale); }, qkv, H, w);
    const Run ops = run([&](auto q, auto k, auto v) { return composed(q, k, v, scale); }, qkv, H, w);
    CHECK(fused.out.shape() == Shape{B, T, H, D});
    CHECK(fused.out.is_contiguous());
    CHECK(max_abs_diff(fused.out, ops.out) <= c.out_tol * max_abs(ops.out));
    CHECK(max_abs_diff(fused.gq, ops.gq) <= c.grad_tol * max_abs(ops.gq));
    CHECK(max_abs_diff(fused.gk, ops.gk) <= c.grad_tol * max_abs(ops.gk));
    CHECK(max_abs_diff(fused.gv, ops.gv) <= c.grad_tol * max_abs(ops.gv));
  }
}

TEST_CASE("causal_attention's lse is each query's log-sum-exp over the keys it sees") {
  const int64_t B = 1, T = 7, H = 2, D = 5;
  Generator gen(23);
  const std::vector<Tensor> p = qkv_views(randn({B, T, 3 * H * D}, gen, DType::f64), H);
  const double scale = 0.8;
  const nograd::CausalAttentionResult r = nograd::causal_attention(p[0], p[1], p[2], scale);
  CHECK(r.lse.shape() == Shape{B, H, T});
  const std::vector<double> q = nograd::clone(p[0]).to_vector<double>(), k = nograd::clone(p[1]).to_vector<double>();
  const std::vector<double> lse = r.lse.to_vector<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[(i * H + h) * D + d] * k[(j * H + h) * D + d];
        sum += std::exp(scale * dot);
      }
      CHECK(lse[h * T + i] == doctest::Approx(std::log(sum)).epsilon(1e-12));
    }
}

TEST_CASE("causal_attention gives the same bits on 1 and on 2 threads") {
  const int64_t B = 2, T = 70, H = 4, D = 32;
  Generator gen(24);
  const Tensor qkv = randn({B, T, 3 * H * D}, gen);
  const Tensor w = randn({B, T, H, D}, gen);
  const int before = omp_get_max_threads();
  std::vector<Run> runs;
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    runs.push_back(run([](auto q, auto k, auto v) { return causal_attention(q, k, v, 0.2); }, qkv, H, w));
  }
  omp_set_num_threads(before);
  CHECK(runs[0].out.to_vector<float>() == runs[1].out.to_vector<float>());
  CHECK(runs[0].gq.to_vector<float>() == runs[1].gq.to_vector<float>());
  CHECK(runs[0].gk.to_vector<float>() == runs[1].gk.to_vector<float>());
  CHECK(runs[0].gv.to_vector<float>() == runs[1].gv.to_vector<float>());
}

TEST_CASE("causal_attention on bf16 computes in f32 and rounds once") {
  const int64_t B = 1, T = 20, H = 2, D = 8;
  Generator gen(25);
  const Tensor qkv32 = randn({B, T, 3 * H * D}, gen);
  const Tensor qkv16 = nograd::to_dtype(qkv32, DType::bf16);
  const Tensor w = nograd::to_dtype(randn({B, T, H, D}, gen), DType::bf16);
  const Run half = run([](auto q, auto k, auto v) { return causal_attention(q, k, v, 0.35); }, qkv16, H, w);
  // The f32 result on the same (bf16-rounded) values, rounded to bf16, is what one rounding gives.
  const Run exact = run([](auto q, auto k, auto v) { return causal_attention(q, k, v, 0.35); },
                        nograd::to_dtype(qkv16, DType::f32), H, nograd::to_dtype(w, DType::f32));
  CHECK(half.out.dtype() == DType::bf16);
  CHECK(half.gq.dtype() == DType::bf16);
  auto values = [](const Tensor& t) { return nograd::to_dtype(t, DType::f32).to_vector<float>(); };
  auto rounded = [&](const Tensor& t) { return values(nograd::to_dtype(t, DType::bf16)); };
  CHECK(values(half.out) == rounded(exact.out));
  CHECK(values(half.gv) == rounded(exact.gv));
}

TEST_CASE("causal_attention refuses operands it cannot attend over, naming them") {
  Generator gen(26);
  const Tensor q = randn({1, 4, 2, 3}, gen);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { causal_attention(randn({4, 2, 3}, gen), q, q, 1.0); }).find("q must be [B, T, H, D], got [4, 2, 3]") !=
        std::string::npos);
  CHECK(message([&] { causal_attention(q, randn({1, 5, 2, 3}, gen), q, 1.0); }).find("k is f32 [1, 5, 2, 3], but q is f32 [1, 4, 2, 3]") !=
        std::string::npos);
  CHECK(message([&] { causal_attention(q, q, nograd::to_dtype(q, DType::f64), 1.0); }).find("v is f64") !=
        std::string::npos);
  CHECK(message([&] { causal_attention(q, q, q, NAN); }).find("scale must be finite") != std::string::npos);
  const nograd::CausalAttentionResult r = nograd::causal_attention(q, q, q, 1.0);
  CHECK(message([&] { nograd::causal_attention_backward(q, q, q, q, r.out, randn({1, 2, 3}, gen), 1.0); })
            .find("causal_attention_backward: lse must be the forward's contiguous f32 [1, 2, 4], got f32 [1, 2, 3]") !=
        std::string::npos);
}

TEST_CASE("nn attention takes the fused op on the CPU, and the separate ops when it drops weights") {
  Generator gen(27);
  nn::CausalSelfAttention att(8, 2, 0.5, gen);
  const Tensor x = randn({2, 5, 8}, gen);
  auto graph_has = [](const Tensor& y, const std::string& name) {
    std::vector<const autograd::Node*> stack{y.grad_fn().get()};
    std::set<const autograd::Node*> seen;
    while (!stack.empty()) {
      const autograd::Node* n = stack.back();
      stack.pop_back();
      if (!n || !seen.insert(n).second) continue;
      if (n->name() == name) return true;
      for (const autograd::Edge& edge : n->next_edges) stack.push_back(edge.node.get());
    }
    return false;
  };
  const Tensor dropping = att(x);  // training, p = 0.5: dropout on the weights needs them whole
  CHECK(graph_has(dropping, "CausalSoftmaxBackward"));
  CHECK_FALSE(graph_has(dropping, "CausalAttentionBackward"));
  att.eval();
  const Tensor fused = att(x);
  CHECK(graph_has(fused, "CausalAttentionBackward"));
  CHECK_FALSE(graph_has(fused, "CausalSoftmaxBackward"));
}
