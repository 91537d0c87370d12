// Losses: shape checks and flattening around the differentiable ops.
#include "nn/loss.h"

#include <fmt/format.h>

namespace accel::nn {

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  if (pred.shape() != target.shape())
    throw Error(fmt::format("mse_loss: pred {} and target {} differ in shape", shape_str(pred.shape()),
                            shape_str(target.shape())));
  const Tensor diff = pred - target;
  return mean(diff * diff);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  if (logits.dim() < 2)
    throw Error(fmt::format("cross_entropy: logits must be [..., C] with at least 2 dims, got {}",
                            shape_str(logits.shape())));
  const Shape batch(logits.shape().begin(), logits.shape().end() - 1);
  if (target.shape() != batch)
    throw Error(fmt::format("cross_entropy: target {} must be logits {} without the class dim, i.e. {}",
                            shape_str(target.shape()), shape_str(logits.shape()), shape_str(batch)));
  const int64_t C = logits.size(-1);
  Tensor loss = accel::cross_entropy(reshape(logits, {-1, C}), reshape(target, {-1}), options);
  return options.reduction == Reduction::none ? reshape(loss, batch) : loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  return nn::cross_entropy(logits, target, {.ignore_index = ignore_index, .reduction = reduction});
}

}  // namespace accel::nn
