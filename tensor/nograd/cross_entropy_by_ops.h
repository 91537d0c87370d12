// cross_entropy with per-class weights and label smoothing composed from raw ops, for devices without
// a fused loop for those options (CUDA): the same loss and grad as the CPU's cross_entropy with options.
#pragma once

#include "tensor/cross_entropy_options.h"
#include "tensor/tensor.h"

namespace accel::nograd {

// logits [N, C] of a floating dtype, target [N] (i64 or i32), options already checked by
// nograd::cross_entropy; the targets are checked here (on a host copy) with the fused loops' message.
// The loss is in the loss dtype (f32, f64 for f64 logits). It allocates a few [N, C] temporaries.
Tensor cross_entropy_by_ops(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);
// grad_loss of the loss's shape and dtype; returns d loss / d logits in logits' dtype.
Tensor cross_entropy_backward_by_ops(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options);

}  // namespace accel::nograd
