// vocab_parallel_cross_entropy: the cross-entropy of logits whose vocabulary dim is split across the
// tensor-parallel group, computed from each rank's shard with three small all-reduces, so that no rank
// ever holds the full [..., V] logits (Megatron-LM's vocab-parallel loss).
#pragma once

#include <cstdint>

#include "collective/communicator.h"
#include "tensor/reduction.h"
#include "tensor/tensor.h"

namespace accel::nn::parallel {

struct VocabParallelCrossEntropyOptions {
  // The real vocabulary. Rank r's shard holds the columns [r Vl, (r + 1) Vl) of a vocab padded to
  // tp.size() * Vl (Vl = logits_shard.size(-1)); the columns at or past vocab_size are padding: they
  // never count, whatever their values, and get a zero grad. 0 means no padding (tp.size() * Vl).
  int64_t vocab_size = 0;
  // As nn::cross_entropy's: rows whose target is ignore_index add nothing and do not count.
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  // As CrossEntropyOptions': [vocab_size] per-class weights of any floating dtype on the logits'
  // device, the whole vocabulary's on every rank (each rank reads its columns), or undefined: every
  // class 1. A row's loss is scaled by its target's weight, and a mean divides by the counted targets'
  // weights. No grad flows to the weights.
  Tensor weight = Tensor();
  // In [0, 1]: the target distribution is (1 - label_smoothing) * onehot + label_smoothing / vocab_size
  // (the padding columns are no classes).
  double label_smoothing = 0.0;
};

// logits_shard [..., Vl] (this rank's columns) against targets [...] (i64 or i32, the same on every
// rank, each in [0, vocab_size) or ignore_index) -> the loss of nn::cross_entropy on the full logits
// with the same options, the same on every rank: a scalar, or per position for Reduction::none. It
// runs exactly three all-reduces over [rows] on tp (the rows' max, their target logit, their sum of
// exponentials; with label_smoothing the target logit travels with the rows' weighted sum of logits)
// and none in backward, where each rank's grad is softmax - one-hot on its own columns (weighted and
// smoothed as the options say). As
// nn::cross_entropy: an f32 loss for f16/bf16 logits (f64 for f64), and 0 for a mean over nothing.
// tp must outlive the graph.
Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const Tensor& target, Communicator& tp,
                                    const VocabParallelCrossEntropyOptions& options = {});

}  // namespace accel::nn::parallel
