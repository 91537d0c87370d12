// ParallelGPTBlock: the full block's two residual branches over its parallel attention and MLP.
#include "nn/parallel/parallel_gpt_block.h"

#include "autograd/functions.h"
#include "nn/parallel/replica.h"

namespace accel::nn::parallel {

ParallelGPTBlock::ParallelGPTBlock(const GPTBlock& full, Communicator& tp, FromFull how) {
  ln_1_ = register_module("ln_1", replica_of(full.ln_1(), how));
  attn_ = register_module("attn", ParallelSelfAttention::from_full(*full.attn(), tp, how));
  ln_2_ = register_module("ln_2", replica_of(full.ln_2(), how));
  mlp_ = register_module("mlp", ParallelMLP::from_full(*full.mlp(), tp, how));
  if (!full.is_training()) eval();
}

std::shared_ptr<ParallelGPTBlock> ParallelGPTBlock::from_full(const GPTBlock& full, Communicator& tp,
                                                               FromFull how) {
  return std::shared_ptr<ParallelGPTBlock>(new ParallelGPTBlock(full, tp, how));
}

Tensor ParallelGPTBlock::forward_impl(const Tensor& x) {
  const Tensor h = x + (*attn_)((*ln_1_)(x));
  return h + (*mlp_)((*ln_2_)(h));
}

}  // namespace accel::nn::parallel
