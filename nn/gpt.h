// nn::GPT: a small GPT-2-style language model, token + position embeddings, pre-LN blocks, a final
// LayerNorm and an untied lm head. Parameter names: wte, wpe, blocks.N.*, ln_f, lm_head.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/gpt_block.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sequential.h"

namespace accel::nn {

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;  // the longest sequence it accepts
  int64_t n_layer = 2;
  int64_t n_head = 2;
  int64_t n_embd = 32;
  double dropout = 0.0;
};

class GPT : public Module {
 public:
  // GPT-2's init: every Linear and Embedding weight from N(0, 0.02^2), Linear biases zero, and the
  // residual projections (attn.proj, mlp.proj) scaled down to 0.02 / sqrt(2 n_layer).
  GPT(const GPTConfig& config, Generator& gen);

  std::string type_name() const override { return "GPT"; }

  const GPTConfig& config() const { return config_; }

 protected:
  // idx [B, T] integer token ids with T <= block_size -> logits [B, T, vocab_size].
  Tensor forward_impl(const Tensor& idx) override;

 private:
  GPTConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<Sequential> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace accel::nn
