// vocab_parallel_cross_entropy: log(sum_j exp(x_j - m)) - (x_t - m) per row, where the max m, the
// target's logit x_t and the sum of exponentials are each one all-reduce of a [rows] vector; the
// backward is local. Weights scale a row by w_t; label smoothing adds eps / C of
// sum_j w_j (log S - (x_j - m)) = W log S - sum_j w_j (x_j - m), whose last sum rides with x_t.
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
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0))
    throw Error(fmt::format("{}: label_smoothing must be in [0, 1], got {}", kOp, options.label_smoothing));
  const Tensor& w = options.weight;
  if (w.defined() && (!is_floating(w.dtype()) || w.shape() != Shape{vocab} || w.device() != logits.device()))
    throw Error(fmt::format("{}: weight is {} {} on {}; expected a floating [{}] (one per class of the vocab_size {}, "
                            "the same on every rank) on {}, the logits' device",
                            kOp, dtype_name(w.dtype()), shape_str(w.shape()), w.device().str(), vocab, vocab,
                            logits.device().str()));
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

// The class weights as one rank's loss reads them, in the loss dtype on the logits' device.
struct ClassWeights {
  bool weighted = false;  // options.weight given
  Tensor columns;         // [1, Vl]: this rank's columns of the weight (1 unweighted), 0 in padding
  Tensor of_target;       // [N, 1]: the counted rows' target weight (1 unweighted), 0 on ignored rows
  double all = 0;         // the weight summed over the vocab (vocab_size unweighted)
};

ClassWeights class_weights(const Tensor& weight, const Tensor& real, const Tensor& target, const Tensor& counted,
                           int64_t start, int64_t valid, int64_t vocab, DType dtype) {
  ClassWeights w;
  w.weighted = weight.defined();
  if (!w.weighted) {
    w.columns = nograd::to_dtype(real, dtype);
    w.of_target = nograd::to_dtype(counted, dtype);
    w.all = static_cast<double>(vocab);
    return w;
  }
  const Tensor full = nograd::to_dtype(weight, dtype);
  const int64_t columns = real.size(1);
  std::vector<Tensor> parts;
  if (valid > 0) parts.push_back(nograd::narrow(full, 0, start, valid));
  if (valid < columns) parts.push_back(zeros({columns - valid}, dtype, full.device()));
  w.columns = nograd::reshape(parts.size() == 1 ? nograd::contiguous(parts[0]) : nograd::cat(parts, 0), {1, columns});
  // Ignored rows look up class 0, and their weight is then masked out.
  const Tensor index = nograd::reshape(
      nograd::where(counted, target, scalar_tensor(0.0, DType::i64, target.device())), {target.numel()});
  w.of_target = nograd::where(counted, nograd::reshape(nograd::index_select(full, 0, index), {target.numel(), 1}),
                              scalar_tensor(0.0, dtype, full.device()));
  w.all = nograd::to_dtype(nograd::sum(full), DType::f64).item();
  return w;
}

// What the loss and its grad read, in the loss dtype on the logits' device.
struct Parts {
  Tensor exp_shifted;  // [N, Vl] exp(x - m), 0 in padding columns
  Tensor sum_exp;      // [N, 1] over the whole vocab
  Tensor is_target;    // bool [N, Vl]: the counted rows' target column, when it is this rank's
  Tensor counted;      // bool [N, 1]: the target is not ignore_index
  Tensor loss_rows;    // [N]: 0 on ignored rows
  ClassWeights weights;
};

Parts forward_parts(const Tensor& logits, const Tensor& target, Communicator& tp, int64_t vocab,
                    const VocabParallelCrossEntropyOptions& options) {
  const int64_t columns = logits.size(-1), rows = logits.numel() / columns;
  const int64_t start = tp.rank() * columns, valid = std::clamp<int64_t>(vocab - start, 0, columns);
  const DType dtype = compute_dtype(logits.dtype());
  const Device device = logits.device();
  const double eps = options.label_smoothing;
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
  p.counted = nograd::ne(t, static_cast<double>(options.ignore_index));
  p.weights = class_weights(options.weight, real, t, p.counted, start, valid, vocab, dtype);
  // Ignored rows, and targets of other ranks, ask for a column this rank does not have (-1 or beyond).
  const Tensor asked = nograd::where(p.counted, nograd::sub(t, static_cast<double>(start)),
                                     scalar_tensor(-1.0, DType::i64, device));
  p.is_target = nograd::eq(asked, column);
  // Column 0 the target's shifted logit; with smoothing, column 1 sum_j w_j (x_j - m) (padding adds 0).
  Tensor summed = nograd::sum(nograd::where(p.is_target, shifted, zero), {1}, true);
  if (eps > 0) {
    const Tensor weighted = nograd::mul(nograd::where(real, shifted, zero), p.weights.columns);
    summed = nograd::cat({summed, nograd::sum(weighted, {1}, true)}, 1);
  }
  summed = nograd::contiguous(summed);
  tp.all_reduce(summed, ReduceOp::sum, "tp vocab_parallel_cross_entropy target-logit all-reduce");

  // Masked rather than left to exp(-inf): a vectorised exp need not give exactly 0 there.
  p.exp_shifted = nograd::where(real, nograd::exp(shifted), zero);
  p.sum_exp = nograd::contiguous(nograd::sum(p.exp_shifted, {1}, true));
  tp.all_reduce(p.sum_exp, ReduceOp::sum, "tp vocab_parallel_cross_entropy sum-exp all-reduce");

  const Tensor log_sum = nograd::log(p.sum_exp);
  Tensor loss = nograd::sub(log_sum, nograd::narrow(summed, 1, 0, 1));
  if (p.weights.weighted) loss = nograd::mul(loss, p.weights.of_target);
  if (eps > 0) {
    const Tensor smooth = nograd::sub(nograd::mul(log_sum, p.weights.all), nograd::narrow(summed, 1, 1, 1));
    loss = nograd::add(nograd::mul(loss, 1.0 - eps), nograd::mul(smooth, eps / static_cast<double>(vocab)));
  }
  p.loss_rows = nograd::reshape(nograd::where(p.counted, loss, zero), {rows});
  return p;
}

// total / count, or 0 where nothing counted: a mean over nothing.
Tensor over_count(const Tensor& total, const Tensor& count, const Tensor& zero) {
  return nograd::where(nograd::eq(count, 0.0), zero, nograd::div(total, count));
}

// d loss_row / d x on this rank's columns, before the reduction's scale:
// (1 - eps) w_t (softmax - onehot) + eps / C (W softmax - w). Padding columns have exp 0, no target
// and no weight, so they get 0.
Tensor row_grads(const Parts& p, double eps, int64_t vocab) {
  const Tensor softmax = nograd::div(p.exp_shifted, p.sum_exp);
  Tensor d = nograd::sub(softmax, nograd::to_dtype(p.is_target, softmax.dtype()));
  if (p.weights.weighted) d = nograd::mul(d, p.weights.of_target);
  if (eps == 0) return d;
  const Tensor smooth = nograd::sub(nograd::mul(softmax, p.weights.all), p.weights.columns);
  return nograd::add(nograd::mul(d, 1.0 - eps), nograd::mul(smooth, eps / static_cast<double>(vocab)));
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const Tensor& target, Communicator& tp,
                                    const VocabParallelCrossEntropyOptions& options) {
  const int64_t vocab = checked_vocab(logits_shard, target, tp, options);
  const Parts p = forward_parts(logits_shard, target, tp, vocab, options);
  const DType dtype = p.loss_rows.dtype();
  const Tensor zero = scalar_tensor(0.0, dtype, logits_shard.device());
  // A mean divides by the counted targets' weights (their number, unweighted).
  const Tensor count = nograd::sum(p.weights.of_target);
  Tensor loss;
  switch (options.reduction) {
    case Reduction::none: loss = nograd::reshape(p.loss_rows, target.shape()); break;
    case Reduction::sum: loss = nograd::sum(p.loss_rows); break;
    case Reduction::mean: loss = over_count(nograd::sum(p.loss_rows), count, zero); break;
  }
  autograd::record("VocabParallelCrossEntropyBackward", {logits_shard}, {loss},
                   [p, count, zero, vocab, eps = options.label_smoothing, reduction = options.reduction,
                    shape = logits_shard.shape(),
                    logits_dtype = logits_shard.dtype()](const std::vector<Tensor>& g) -> std::vector<Tensor> {
                     Tensor scale;
                     switch (reduction) {
                       case Reduction::none: scale = nograd::reshape(g[0], {-1, 1}); break;
                       case Reduction::sum: scale = g[0]; break;
                       case Reduction::mean: scale = over_count(g[0], count, zero); break;
                     }
                     const Tensor grad = nograd::where(p.counted, nograd::mul(row_grads(p, eps, vocab), scale), zero);
                     return {nograd::reshape(nograd::to_dtype(grad, logits_dtype), shape)};
                   });
  return loss;
}

}  // namespace accel::nn::parallel
