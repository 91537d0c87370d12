// CPU cross-entropy fused with log-softmax over the rows of [N, C] logits, and its backward pass.
#pragma once

#include "tensor/cross_entropy_options.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/tensor.h"

namespace accel::cpu {

// logits contiguous [N, C]; target contiguous [N] (i64 or i32); loss is [N] (none) or 0-d, of the
// loss dtype (f64 for f64 logits, else f32). Throws accel::Error naming the first target outside
// [0, C) that is not ignore_index.
void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                   nograd::Reduction reduction);
// grad_logits contiguous [N, C] of the logits dtype; grad_loss contiguous, of the loss's shape and dtype.
void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, int64_t ignore_index, nograd::Reduction reduction);

// With per-class weights (options.weight contiguous [C] of the loss dtype, or undefined) and label
// smoothing, as kernels/nn_math.h's cross_entropy_smoothed_* write it: a row's loss is scaled by its
// target's weight, and a mean divides by the summed weight of the counted targets (0 when that is 0).
void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);
void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, const CrossEntropyOptions& options);

}  // namespace accel::cpu
