// Losses: mean squared error and cross-entropy (fused log-softmax + NLL) over class logits.
#pragma once

#include "autograd/functions.h"
#include "tensor/tensor.h"

namespace accel::nn {

// mean((pred - target)^2); pred and target have the same shape.
Tensor mse_loss(const Tensor& pred, const Tensor& target);

// logits [..., C] against integer targets [...] (a language model's [B, T, C] and [B, T], say),
// flattened to [N, C] and [N]. Targets equal to ignore_index add nothing and are not counted.
// Reduction::none returns the per-position losses in target's shape. The options add PyTorch's
// per-class weight and label_smoothing: cross_entropy(logits, y, {.label_smoothing = 0.1}).
// Differs from PyTorch on purpose (accel::cross_entropy): an f32 loss for f16/bf16 logits, and 0 (not
// NaN) for a mean over nothing.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);

}  // namespace accel::nn
