// nn::GPTBlock: one pre-LayerNorm transformer block, x + attn(ln_1(x)) then x + mlp(ln_2(x)).
#pragma once

#include <memory>

#include "nn/attention.h"
#include "nn/layer_norm.h"
#include "nn/mlp.h"
#include "nn/module.h"

namespace accel::nn {

class GPTBlock : public Module {
 public:
  GPTBlock(int64_t n_embd, int64_t n_head, double dropout, Generator& gen);

  std::string type_name() const override { return "GPTBlock"; }

  const std::shared_ptr<LayerNorm>& ln_1() const { return ln_1_; }
  const std::shared_ptr<CausalSelfAttention>& attn() const { return attn_; }
  const std::shared_ptr<LayerNorm>& ln_2() const { return ln_2_; }
  const std::shared_ptr<MLP>& mlp() const { return mlp_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [B, T, n_embd] -> [B, T, n_embd]

 private:
  std::shared_ptr<LayerNorm> ln_1_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<LayerNorm> ln_2_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace accel::nn
