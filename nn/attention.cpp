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

Tensor CausalSelfAttention::forward_impl(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != n_embd_)
    throw Error(fmt::format("CausalSelfAttention: input must be [B, T, {}], got {}", n_embd_, shape_str(x.shape())));
  const int64_t B = x.size(0), T = x.size(1), H = n_head_, D = n_embd_ / n_head_;
  // [B, T, 3C] -> three [B, H, T, D] views.
  std::vector<Tensor> qkv = split((*qkv_)(x), n_embd_, 2);
  auto heads = [&](const Tensor& t) { return transpose(reshape(t, {B, T, H, D}), 1, 2); };
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);

  // [B, H, T, T] scores, scaled, the future masked and a softmax over the keys, in one op.
  Tensor att = causal_softmax(matmul(q, transpose(k, 2, 3)), 1.0 / std::sqrt(static_cast<double>(D)));
  att = (*attn_drop_)(att);
  const Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, n_embd_});  // heads side by side again
  return (*resid_drop_)((*proj_)(y));
}

}  // namespace accel::nn
