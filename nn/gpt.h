// nn::GPT: a GPT-2-style language model, token + position embeddings, pre-LN blocks, a final LayerNorm
// and an lm head, its own or tied to the token embedding. Parameter names: wte, wpe, blocks.N.*, ln_f,
// and lm_head when untied. parallelize splits it Megatron-style across a tensor-parallel group, under
// the same names.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/gpt_block.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/parallel/column_parallel_linear.h"
#include "nn/parallel/tensor_parallel_model.h"
#include "nn/parallel/vocab_parallel_embedding.h"
#include "nn/reads_descendant_parameters.h"
#include "nn/sequential.h"
#include "tensor/cross_entropy_options.h"
#include "tensor/reduction.h"

namespace accel::nn {

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;  // the longest sequence it accepts
  int64_t n_layer = 2;
  int64_t n_head = 2;
  int64_t n_embd = 32;
  double dropout = 0.0;
  // GPT-2's head: logits = ln_f(x) wte^T, one parameter (wte.weight) whose grad sums both uses.
  bool tie_weights = false;
  // 0: none. Else wte has this many rows (>= vocab_size, e.g. 50257 -> 50304 as llm.c pads it), for
  // row counts friendly to GEMMs and llm.c's files. The rows past vocab_size start at zero, are never
  // looked up, and the tied head reads only the first vocab_size rows, so logits stay [.., vocab_size]:
  // a padded id is never in the loss nor sampled, and its rows get zero grad (as in llm.c, whose loss
  // and softmax stop at V).
  int64_t padded_vocab_size = 0;

  // wte's rows: padded_vocab_size when set, else vocab_size.
  int64_t embedding_rows() const { return padded_vocab_size > 0 ? padded_vocab_size : vocab_size; }

  // GPT-2 as released and as llm.c trains it, by depth: 12 (124M), 24 (350M), 36 (774M), 48 (1558M).
  // Head size 64, block_size 1024, vocab 50257 padded to 50304, tied head, no dropout.
  static GPTConfig gpt2(int depth);
};

class GPT : public Module, public parallel::TensorParallelModel, public ReadsDescendantParameters {
 public:
  // GPT-2's init: every Linear and Embedding weight from N(0, 0.02^2), Linear biases zero, and the
  // residual projections (attn.proj, mlp.proj) scaled down to 0.02 / sqrt(2 n_layer). A tied head
  // is wte, drawn once; wte's padding rows are zero (llm.c draws only the real rows).
  GPT(const GPTConfig& config, Generator& gen);

  std::string type_name() const override { return "GPT"; }

  const GPTConfig& config() const { return config_; }

  // The cross-entropy of forward(idx) against targets [B, T] (nn::cross_entropy's options: ignore_index,
  // reduction, and per-class weight and label_smoothing). Tensor-parallel, it takes the vocab-parallel
  // loss of each rank's logit columns, so no rank holds the full [B, T, vocab] logits; forward's hooks
  // run either way.
  Tensor loss(const Tensor& idx, const Tensor& targets, int64_t ignore_index = -100,
              Reduction reduction = Reduction::mean);
  Tensor loss(const Tensor& idx, const Tensor& targets, const CrossEntropyOptions& options);

  // Megatron's split: wte a VocabParallelEmbedding (a tied head multiplies by its local rows), each
  // block a ParallelGPTBlock, an untied lm_head a ColumnParallelLinear padded to a multiple of tp.
  // n_head must divide by tp.size(); the vocabulary need not. forward then returns the gathered
  // logits, the same on every rank of tp.
  void parallelize(Communicator& tp) override;
  Communicator* tensor_parallel_group() const override { return tp_; }

  // A tied head reads wte's weight in GPT's own forward.
  std::vector<Tensor> parameters_read_directly() const override;

 protected:
  // idx [B, T] integer token ids with T <= block_size -> logits [B, T, vocab_size].
  Tensor forward_impl(const Tensor& idx) override;

 private:
  GPTConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<Sequential> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;  // null when tied
  // Once parallel: these replace wte_ and lm_head_ (which are then null).
  Communicator* tp_ = nullptr;
  std::shared_ptr<parallel::VocabParallelEmbedding> tp_wte_;
  std::shared_ptr<parallel::ColumnParallelLinear> tp_head_;
  bool local_logits_only_ = false;  // set by loss: forward returns this rank's logit columns

  Tensor head(const Tensor& x);
};

}  // namespace accel::nn
