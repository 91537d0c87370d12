// nn::GPT: construction with GPT-2's init, the GPT-2 presets, the forward from token ids to logits, the
// loss, and the tensor-parallel split.
#include "nn/gpt.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "autograd/functions.h"
#include "nn/init.h"
#include "nn/loss.h"
#include "nn/parallel/parallel_gpt_block.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/tp_mappings.h"
#include "nn/parallel/vocab_parallel_cross_entropy.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

namespace accel::nn {

GPTConfig GPTConfig::gpt2(int depth) {
  // depth -> n_embd, llm.c's gpt2_set_hyperparameters; the head size is 64 in all four.
  static constexpr std::pair<int, int64_t> kWidths[] = {{12, 768}, {24, 1024}, {36, 1280}, {48, 1600}};
  int64_t n_embd = 0;
  for (const auto& [d, c] : kWidths)
    if (d == depth) n_embd = c;
  if (n_embd == 0)
    throw Error(fmt::format(
        "GPTConfig::gpt2: depth {} is not one of GPT-2's 12 (124M), 24 (350M), 36 (774M) or 48 (1558M)", depth));
  return GPTConfig{.vocab_size = 50257,
                   .block_size = 1024,
                   .n_layer = depth,
                   .n_head = n_embd / 64,
                   .n_embd = n_embd,
                   .dropout = 0.0,
                   .tie_weights = true,
                   .padded_vocab_size = 50304};
}

namespace {

void check_config(const GPTConfig& config) {
  if (config.vocab_size <= 0 || config.block_size <= 0 || config.n_layer <= 0)
    throw Error(fmt::format("GPT: vocab_size {}, block_size {} and n_layer {} must be positive", config.vocab_size,
                            config.block_size, config.n_layer));
  if (config.padded_vocab_size != 0 && config.padded_vocab_size < config.vocab_size)
    throw Error(fmt::format("GPT: padded_vocab_size {} must be 0 (none) or >= vocab_size {}", config.padded_vocab_size,
                            config.vocab_size));
}

}  // namespace

GPT::GPT(const GPTConfig& config, Generator& gen) : config_(config) {
  check_config(config);
  // Each residual branch adds to the stream, so their output projections start smaller to keep the
  // stream's variance from growing with depth.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  auto init_linear = [&](Linear& linear, double std) {
    init::normal_(linear.weight(), 0.0, std, gen);
    init::zeros_(linear.bias());
  };
  const int64_t rows = config.embedding_rows();
  wte_ = register_module("wte", std::make_shared<Embedding>(rows, config.n_embd, gen, 0.02));
  if (rows > config.vocab_size)
    init::zeros_(nograd::narrow(wte_->weight(), 0, config.vocab_size, rows - config.vocab_size));
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
  if (!config.tie_weights) {
    lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.n_embd, config.vocab_size, false, gen));
    init::normal_(lm_head_->weight(), 0.0, 0.02, gen);
  }
}

Tensor GPT::forward_impl(const Tensor& idx) {
  if (idx.dim() != 2 || !(idx.dtype() == DType::i64 || idx.dtype() == DType::i32))
    throw Error(fmt::format("GPT: idx must be [B, T] of i64 or i32, got {}", idx.str()));
  const int64_t T = idx.size(1);
  if (T > config_.block_size)
    throw Error(fmt::format("GPT: sequence length {} exceeds block_size {}", T, config_.block_size));
  const Tensor positions = arange(T, DType::i64, idx.device());
  const Tensor tokens = tp_wte_ ? (*tp_wte_)(idx) : (*wte_)(idx);
  const Tensor x = (*drop_)(tokens + (*wpe_)(positions));  // [B, T, C] + [T, C]
  return head((*ln_f_)((*blocks_)(x)));
}

Tensor GPT::head(const Tensor& x) {
  if (tp_) {
    // This rank's vocab columns: the tied head's product with the local rows of wte (f first, so the
    // grad of x sums every rank's columns), or the column-parallel head.
    const Tensor local = tp_head_ ? (*tp_head_)(x) : accel::linear(parallel::copy_to_tp_region(x, *tp_),
                                                                    tp_wte_->weight(), Tensor());
    if (local_logits_only_) return local;
    const Tensor logits = parallel::gather_from_tp_region(local, *tp_);
    return logits.size(2) == config_.vocab_size ? logits : narrow(logits, 2, 0, config_.vocab_size);
  }
  if (lm_head_) return (*lm_head_)(x);
  // The real rows only: the same product as llm.c's over all rows with the padded logits dropped,
  // without computing them. narrow's backward gives the padded rows a zero grad.
  const Tensor head =
      config_.embedding_rows() > config_.vocab_size ? narrow(wte_->weight(), 0, 0, config_.vocab_size) : wte_->weight();
  return accel::linear(x, head, Tensor());
}

std::vector<Tensor> GPT::parameters_read_directly() const {
  if (!config_.tie_weights) return {};
  return {tp_wte_ ? tp_wte_->weight() : wte_->weight()};
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  return loss(idx, targets, CrossEntropyOptions{.ignore_index = ignore_index, .reduction = reduction});
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets, const CrossEntropyOptions& options) {
  if (!tp_) return nn::cross_entropy(forward(idx), targets, options);
  struct LocalLogits {
    bool& flag;
    explicit LocalLogits(bool& f) : flag(f) { flag = true; }
    ~LocalLogits() { flag = false; }
  } local_only(local_logits_only_);
  const Tensor local = forward(idx);
  return parallel::vocab_parallel_cross_entropy(
      local, targets, *tp_,
      {.vocab_size = config_.vocab_size, .ignore_index = options.ignore_index, .reduction = options.reduction,
       .weight = options.weight, .label_smoothing = options.label_smoothing});
}

void GPT::parallelize(Communicator& tp) {
  if (tp_)
    throw Error(fmt::format("GPT::parallelize: the model is tensor-parallel already (over {} ranks)", tp_->size()));
  // Checked before anything moves, so a refusal leaves the model whole.
  parallel::divide_by_tp("GPT::parallelize", "n_head", config_.n_head, tp.size());
  using parallel::FromFull;
  tp_wte_ = parallel::VocabParallelEmbedding::from_full(*wte_, tp, FromFull::in_place);
  replace_module("wte", tp_wte_);
  wte_.reset();
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const auto& block = dynamic_cast<const GPTBlock&>((*blocks_)[i]);
    blocks_->replace_module(std::to_string(i), parallel::ParallelGPTBlock::from_full(block, tp, FromFull::in_place));
  }
  if (lm_head_) {
    tp_head_ = parallel::ColumnParallelLinear::from_full(*lm_head_, tp, {.gather_output = false, .pad_output = true},
                                                         FromFull::in_place);
    replace_module("lm_head", tp_head_);
    lm_head_.reset();
  }
  tp_ = &tp;
}

}  // namespace accel::nn
