// nn::parallel::ParallelGPTBlock: a GPT block under Megatron-style tensor parallelism: attention heads
// and MLP hidden units split across the group, LayerNorms and residuals replicated. Each block runs
// two all-reduces forward (after the attention and after the MLP) and two backward (into each).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/gpt_block.h"
#include "nn/layer_norm.h"
#include "nn/module.h"
#include "nn/parallel/parallel_mlp.h"
#include "nn/parallel/parallel_self_attention.h"

namespace accel::nn::parallel {

class ParallelGPTBlock : public Module {
 public:
  // This rank's part of a full block, copied: n_head and the MLP's hidden width must be multiples of
  // tp.size(). The parameter names are the full block's (ln_1.weight, attn.qkv.weight, ...), each
  // holding this rank's part (ParallelSelfAttention and ParallelMLP say which). FromFull::in_place
  // takes full's parameters and LayerNorms instead of copying them.
  static std::shared_ptr<ParallelGPTBlock> from_full(const GPTBlock& full, Communicator& tp,
                                                     FromFull how = FromFull::copy);

  std::string type_name() const override { return "ParallelGPTBlock"; }

  const std::shared_ptr<LayerNorm>& ln_1() const { return ln_1_; }
  const std::shared_ptr<ParallelSelfAttention>& attn() const { return attn_; }
  const std::shared_ptr<LayerNorm>& ln_2() const { return ln_2_; }
  const std::shared_ptr<ParallelMLP>& mlp() const { return mlp_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [B, T, n_embd] replicated -> replicated

 private:
  ParallelGPTBlock(const GPTBlock& full, Communicator& tp, FromFull how);

  std::shared_ptr<LayerNorm> ln_1_;
  std::shared_ptr<ParallelSelfAttention> attn_;
  std::shared_ptr<LayerNorm> ln_2_;
  std::shared_ptr<ParallelMLP> mlp_;
};

}  // namespace accel::nn::parallel
