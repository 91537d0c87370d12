// nn::GPTBlock: the two residual branches.
#include "nn/gpt_block.h"

#include "autograd/functions.h"

namespace accel::nn {

GPTBlock::GPTBlock(int64_t n_embd, int64_t n_head, double dropout, Generator& gen) {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(n_embd));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head, dropout, gen));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(n_embd));
  mlp_ = register_module("mlp", std::make_shared<MLP>(n_embd, dropout, gen));
}

Tensor GPTBlock::forward_impl(const Tensor& x) {
  const Tensor h = x + (*attn_)((*ln_1_)(x));
  return h + (*mlp_)((*ln_2_)(h));
}

}  // namespace accel::nn
