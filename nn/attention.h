// nn::CausalSelfAttention: multi-head self-attention in which position t sees positions <= t only.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace accel::nn {

// softmax(q k^T / sqrt(D), the future masked) v for q, k, v [B, T, H, D] (views of a fused qkv
// projection), with the heads side by side again: [B, T, H * D]. On the CPU, with attn_drop idle
// (eval, or p = 0), one fused op per head; else the separate ops, attn_drop on the weights.
Tensor causal_attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, Dropout& attn_drop);

class CausalSelfAttention : public Module {
 public:
  // A fused projection `qkv` (n_embd -> 3 n_embd) and an output projection `proj`; dropout on the
  // attention weights (`attn_drop`) and on the output (`resid_drop`).
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout, Generator& gen);

  std::string type_name() const override { return "CausalSelfAttention"; }

  int64_t n_embd() const { return n_embd_; }
  int64_t n_head() const { return n_head_; }
  const std::shared_ptr<Linear>& qkv() const { return qkv_; }
  const std::shared_ptr<Linear>& proj() const { return proj_; }
  const std::shared_ptr<Dropout>& attn_drop() const { return attn_drop_; }
  const std::shared_ptr<Dropout>& resid_drop() const { return resid_drop_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [B, T, n_embd] -> [B, T, n_embd]

 private:
  int64_t n_embd_, n_head_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<Dropout> attn_drop_, resid_drop_;
};

}  // namespace accel::nn
