// nn::GPT: construction with GPT-2's init, and the forward from token ids to logits.
#include "nn/gpt.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/creation.h"

namespace accel::nn {

GPT::GPT(const GPTConfig& config, Generator& gen) : config_(config) {
  if (config.vocab_size <= 0 || config.block_size <= 0 || config.n_layer <= 0)
    throw Error(fmt::format("GPT: vocab_size {}, block_size {} and n_layer {} must be positive", config.vocab_size,
                            config.block_size, config.n_layer));
  // Each residual branch adds to the stream, so their output projections start smaller to keep the
  // stream's variance from growing with depth.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  auto init_linear = [&](Linear& linear, double std) {
    init::normal_(linear.weight(), 0.0, std, gen);
    init::zeros_(linear.bias());
  };
  wte_ = register_module("wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd, gen, 0.02));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(config.block_size, config.n_embd, gen, 0.02));
  drop_ = register_module("drop", std::make_shared<Dropout>(config.dropout, gen));
  blocks_ = register_module("blocks", std::make_shared<Sequential>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    auto block = blocks_->push_back(std::make_shared<GPTBlock>(config.n_embd, config.n_head, config.dropout, gen));
    init_linear(*block->attn()->qkv(), 0.02);
    init_linear(*block->attn()->proj(), residual_std);
    init_linear(*block->mlp()->fc(), 0.02);
    init_linear(*block->mlp()->proj(), residual_std);
  }
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config.n_embd));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.n_embd, config.vocab_size, false, gen));
  init::normal_(lm_head_->weight(), 0.0, 0.02, gen);
}

Tensor GPT::forward_impl(const Tensor& idx) {
  if (idx.dim() != 2 || !(idx.dtype() == DType::i64 || idx.dtype() == DType::i32))
    throw Error(fmt::format("GPT: idx must be [B, T] of i64 or i32, got {}", idx.str()));
  const int64_t T = idx.size(1);
  if (T > config_.block_size)
    throw Error(fmt::format("GPT: sequence length {} exceeds block_size {}", T, config_.block_size));
  const Tensor positions = arange(T, DType::i64, idx.device());
  Tensor x = (*drop_)((*wte_)(idx) + (*wpe_)(positions));  // [B, T, C] + [T, C]
  x = (*blocks_)(x);
  return (*lm_head_)((*ln_f_)(x));
}

}  // namespace accel::nn
