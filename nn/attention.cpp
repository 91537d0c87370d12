// nn::CausalSelfAttention: softmax(q k^T / sqrt(d), future masked to -inf) v, per head.
#include "nn/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/functions.h"

namespace accel::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout, Generator& gen)
    : n_embd_(n_embd), n_head_(n_head) {
  if (n_head <= 0 || n_embd <= 0 || n_embd % n_head != 0)
    throw Error(fmt::format("CausalSelfAttention: n_embd {} must be a positive multiple of n_head {}", n_embd,
                            n_head));
  qkv_ = register_module("qkv", std::make_shared<Linear>(n_embd, 3 * n_embd, true, gen));
  proj_ = register_module("proj", std::make_shared<Linear>(n_embd, n_embd, true, gen));
  attn_drop_ = register_module("attn_drop", std::make_shared<Dropout>(dropout, gen));
  resid_drop_ = register_module("resid_drop", std::make_shared<Dropout>(dropout, gen));
}

Tensor causal_attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, Dropout& attn_drop) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const bool drops = attn_drop.is_training() && attn_drop.p() > 0;
  if (q.device().is_cpu() && !drops) return reshape(causal_attention(q, k, v, scale), {B, T, H * D});
  auto by_head = [](const Tensor& t) { return transpose(t, 1, 2); };  // [B, H, T, D]
  // [B, H, T, T] scores, scaled, the future masked and a softmax over the keys, in one op.
  const Tensor att = attn_drop(causal_softmax(matmul(by_head(q), transpose(by_head(k), 2, 3)), scale));
  return reshape(transpose(matmul(att, by_head(v)), 1, 2), {B, T, H * D});
}

Tensor CausalSelfAttention::forward_impl(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != n_embd_)
    throw Error(fmt::format("CausalSelfAttention: input must be [B, T, {}], got {}", n_embd_, shape_str(x.shape())));
  const int64_t B = x.size(0), T = x.size(1), H = n_head_, D = n_embd_ / n_head_;
  // [B, T, 3C] -> three [B, T, H, D] views.
  std::vector<Tensor> qkv = split((*qkv_)(x), n_embd_, 2);
  auto heads = [&](const Tensor& t) { return reshape(t, {B, T, H, D}); };
  const Tensor y = causal_attention_heads(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), *attn_drop_);
  return (*resid_drop_)((*proj_)(y));
}

}  // namespace accel::nn
