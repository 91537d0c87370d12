// vocab_parallel_cross_entropy: log(sum_j exp(x_j - m)) - (x_t - m) per row, where the max m, the
// target's logit x_t and the sum of exponentials are each one all-reduce of a [rows] vector; the
// backward is local.
#include "nn/parallel/vocab_parallel_cross_entropy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel::nn::parallel {

namespace {

constexpr const char* kOp = "vocab_parallel_cross_entropy";

// Checks what every rank can check alone; returns the real vocab size.
int64_t checked_vocab(const Tensor& logits, const Tensor& target, const Communicator& tp,
                      const VocabParallelCrossEntropyOptions& options) {
  if (!logits.defined() || !target.defined()) throw Error(fmt::format("{}: logits and target must be defined", kOp));
  if (logits.dim() < 2 || !is_floating(logits.dtype()))
    throw Error(fmt::format("{}: logits_shard must be floating [..., V / tp] with at least 2 dims, got {} {}", kOp,
                            dtype_name(logits.dtype()), shape_str(logits.shape())));
  const Shape batch(logits.shape().begin(), logits.shape().end() - 1);
  if (target.shape() != batch)
    throw Error(fmt::format("{}: target {} must be logits_shard {} without the class dim, i.e. {}", kOp,
                            shape_str(target.shape()), shape_str(logits.shape()), shape_str(batch)));
  if (target.dtype() != DType::i64 && target.dtype() != DType::i32)
    throw Error(fmt::format("{}: target must be i64 or i32, got {}", kOp, dtype_name(target.dtype())));
  if (logits.device() != tp.device())
    throw Error(fmt::format("{}: logits_shard is on {}, but the tensor-parallel communicator moves tensors on {}", kOp,
                            logits.device().str(), tp.device().str()));
  const int64_t padded = logits.size(-1) * tp.size();
  const int64_t vocab = options.vocab_size == 0 ? padded : options.vocab_size;
  if (vocab <= 0 || vocab > padded)
    throw Error(fmt::format("{}: vocab_size {} must be in (0, {}], the {} ranks' {} columns each", kOp, vocab, padded,
                            tp.size(), logits.size(-1)));
  const std::vector<int64_t> targets = nograd::to_device(nograd::to_dtype(target, DType::i64), Device::cpu())
                                           .to_vector<int64_t>();
  for (size_t i = 0; i < targets.size(); ++i) {
    const int64_t t = targets[i];
    if (t != options.ignore_index && (t < 0 || t >= vocab))
      throw Error(fmt::format("{}: target {} at row {} is outside [0, {}) and is not ignore_index {}", kOp, t, i, vocab,
                              options.ignore_index));
  }
  return vocab;
}

// What the loss and its grad read, in the loss dtype on the logits' device.
struct Parts {
  Tensor exp_shifted;  // [N, Vl] exp(x - m), 0 in padding columns
  Tensor sum_exp;      // [N, 1] over the whole vocab
  Tensor is_target;    // bool [N, Vl]: the counted rows' target column, when it is this rank's
  Tensor counted;      // bool [N, 1]: the target is not ignore_index
  Tensor loss_rows;    // [N]: 0 on ignored rows
};

Parts forward_parts(const Tensor& logits, const Tensor& target, Communicator& tp, int64_t vocab,
                    int64_t ignore_index) {
  const int64_t columns = logits.size(-1), rows = logits.numel() / columns;
  const int64_t start = tp.rank() * columns, valid = std::clamp<int64_t>(vocab - start, 0, columns);
  const DType dtype = compute_dtype(logits.dtype());
  const Device device = logits.device();
  const Tensor zero = scalar_tensor(0.0, dtype, device);
  const Tensor column = nograd::reshape(arange(columns, DType::i64, device), {1, columns});
  const Tensor real = nograd::lt(column, static_cast<double>(valid));  // bool [1, Vl]: not padding
  const Tensor x = nograd::where(real, nograd::to_dtype(nograd::reshape(logits, {rows, columns}), dtype),
                                 scalar_tensor(-INFINITY, dtype, device));
  Parts p;
  Tensor max = nograd::contiguous(nograd::max(x, {1}, true));
  tp.all_reduce(max, ReduceOp::max, "tp vocab_parallel_cross_entropy max all-reduce");
  const Tensor shifted = nograd::sub(x, max);

  const Tensor t = nograd::reshape(nograd::to_dtype(target, DType::i64), {rows, 1});
  p.counted = nograd::ne(t, static_cast<double>(ignore_index));
  // Ignored rows, and targets of other ranks, ask for a column this rank does not have (-1 or beyond).
  const Tensor asked = nograd::where(p.counted, nograd::sub(t, static_cast<double>(start)),
                                     scalar_tensor(-1.0, DType::i64, device));
  p.is_target = nograd::eq(asked, column);
  Tensor target_logit = nograd::contiguous(nograd::sum(nograd::where(p.is_target, shifted, zero), {1}, true));
  tp.all_reduce(target_logit, ReduceOp::sum, "tp vocab_parallel_cross_entropy target-logit all-reduce");

  // Masked rather than left to exp(-inf): a vectorised exp need not give exactly 0 there.
  p.exp_shifted = nograd::where(real, nograd::exp(shifted), zero);
  p.sum_exp = nograd::contiguous(nograd::sum(p.exp_shifted, {1}, true));
  tp.all_reduce(p.sum_exp, ReduceOp::sum, "tp vocab_parallel_cross_entropy sum-exp all-reduce");

  const Tensor loss = nograd::sub(nograd::log(p.sum_exp), target_logit);
  p.loss_rows = nograd::reshape(nograd::where(p.counted, loss, zero), {rows});
  return p;
}

// total / count, or 0 where nothing counted: a mean over nothing.
Tensor over_count(const Tensor& total, const Tensor& count, const Tensor& zero) {
  return nograd::where(nograd::eq(count, 0.0), zero, nograd::div(total, count));
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const Tensor& target, Communicator& tp,
                                    const VocabParallelCrossEntropyOptions& options) {
  const int64_t vocab = checked_vocab(logits_shard, target, tp, options);
  const Parts p = forward_parts(logits_shard, target, tp, vocab, options.ignore_index);
  const DType dtype = p.loss_rows.dtype();
  const Tensor zero = scalar_tensor(0.0, dtype, logits_shard.device());
  const Tensor count = nograd::sum(nograd::to_dtype(p.counted, dtype));
  Tensor loss;
  switch (options.reduction) {
    case Reduction::none: loss = nograd::reshape(p.loss_rows, target.shape()); break;
    case Reduction::sum: loss = nograd::sum(p.loss_rows); break;
    case Reduction::mean: loss = over_count(nograd::sum(p.loss_rows), count, zero); break;
  }
  autograd::record("VocabParallelCrossEntropyBackward", {logits_shard}, {loss},
                   [p, count, zero, reduction = options.reduction, shape = logits_shard.shape(),
                    logits_dtype = logits_shard.dtype()](const std::vector<Tensor>& g) -> std::vector<Tensor> {
                     // softmax - one-hot on this rank's columns; padding columns have exp 0 and no target.
                     const Tensor softmax = nograd::div(p.exp_shifted, p.sum_exp);
                     const Tensor d = nograd::sub(softmax, nograd::to_dtype(p.is_target, softmax.dtype()));
                     Tensor scale;
                     switch (reduction) {
                       case Reduction::none: scale = nograd::reshape(g[0], {-1, 1}); break;
                       case Reduction::sum: scale = g[0]; break;
                       case Reduction::mean: scale = over_count(g[0], count, zero); break;
                     }
                     const Tensor grad = nograd::where(p.counted, nograd::mul(d, scale), zero);
                     return {nograd::reshape(nograd::to_dtype(grad, logits_dtype), shape)};
                   });
  return loss;
}

}  // namespace accel::nn::parallel
