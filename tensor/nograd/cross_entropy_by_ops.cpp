// cross_entropy with options as a composition of raw ops: log_softmax, a one-hot of the counted
// targets, weighted row sums, and a mean over the counted weight. It reads like the formula of
// kernels/nn_math.h's cross_entropy_smoothed_*, and the CPU tests hold it to the fused loops.
#include "tensor/nograd/cross_entropy_by_ops.h"

#include <vector>

#include "tensor/cpu/index_check.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel::nograd {

namespace {

// What the loss and its grad both read, in the loss dtype on the logits' device.
struct Parts {
  int64_t rows = 0, classes = 0;
  Tensor x;              // the logits [N, C]
  Tensor counted;        // bool [N, 1]: the target is not ignore_index
  Tensor is_target;      // bool [N, C]: one-hot of the counted targets, all false on ignored rows
  Tensor weight;         // [1, C]: the class weights, all 1 without weights
  Tensor target_weight;  // [N]: w[t] of each counted row, 0 on ignored rows
  Tensor zero;           // 0-d
};

Parts parts_of(const char* op, const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  Parts p;
  p.rows = logits.shape()[0];
  p.classes = logits.shape()[1];
  cpu::dispatch_index(target.dtype(), op, [&]<class I>() {
    const std::vector<I> host = target.to_vector<I>();
    cpu::check_targets(op, host.data(), p.rows, p.classes, options.ignore_index);
  });
  const DType dtype = compute_dtype(logits.dtype());
  const Device device = logits.device();
  p.x = to_dtype(logits, dtype);
  p.zero = scalar_tensor(0.0, dtype, device);
  const Tensor t = reshape(to_dtype(target, DType::i64), {p.rows, 1});
  p.counted = ne(t, static_cast<double>(options.ignore_index));
  // Ignored rows ask for class -1, which no class is.
  const Tensor asked = where(p.counted, t, scalar_tensor(-1.0, DType::i64, device));
  p.is_target = eq(asked, reshape(arange(p.classes, DType::i64, device), {1, p.classes}));
  p.weight = options.weight.defined() ? reshape(to_dtype(options.weight, dtype), {1, p.classes})
                                      : ones({1, p.classes}, dtype, device);
  p.target_weight = sum(where(p.is_target, p.weight, p.zero), {1});
  return p;
}

// total / weight, or 0 where the weight is 0: a mean over nothing.
Tensor over_weight(const Tensor& total, const Tensor& weight, const Tensor& zero) {
  return where(eq(weight, 0.0), zero, div(total, weight));
}

}  // namespace

Tensor cross_entropy_by_ops(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const Parts p = parts_of("cross_entropy", logits, target, options);
  const double eps = options.label_smoothing;
  const Tensor weighted_logp = mul(log_softmax(p.x, 1), p.weight);
  // (1 - eps) * w[t] * -log p[t], picked by where so that a -inf logit of another class adds nothing.
  Tensor loss = mul(sum(where(p.is_target, weighted_logp, p.zero), {1}), -(1.0 - eps));
  if (eps > 0) {
    const Tensor smooth = where(reshape(p.counted, {p.rows}), neg(sum(weighted_logp, {1})), p.zero);
    loss = add(loss, mul(smooth, eps / static_cast<double>(p.classes)));
  }
  switch (options.reduction) {
    case Reduction::none: return loss;
    case Reduction::sum: return sum(loss);
    case Reduction::mean: break;
  }
  return over_weight(sum(loss), sum(p.target_weight), p.zero);
}

Tensor cross_entropy_backward_by_ops(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options) {
  const Parts p = parts_of("cross_entropy_backward", logits, target, options);
  const double eps = options.label_smoothing, on_weight = eps / static_cast<double>(p.classes);
  // scale * (softmax * on_softmax - onehot * on_target - w * on_weight), as cross_entropy_smoothed_coefs.
  const Tensor on_target = reshape(mul(p.target_weight, 1.0 - eps), {p.rows, 1});
  const Tensor on_softmax = add(on_target, mul(sum(p.weight), on_weight));
  Tensor d = sub(mul(softmax(p.x, 1), on_softmax), where(p.is_target, on_target, p.zero));
  if (eps > 0) d = sub(d, mul(p.weight, on_weight));
  Tensor scale;
  switch (options.reduction) {
    case Reduction::none: scale = reshape(grad_loss, {p.rows, 1}); break;
    case Reduction::sum: scale = grad_loss; break;
    case Reduction::mean: scale = over_weight(grad_loss, sum(p.target_weight), p.zero); break;
  }
  return to_dtype(where(p.counted, mul(d, scale), p.zero), logits.dtype());
}

}  // namespace accel::nograd
