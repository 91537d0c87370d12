// CUDA twins of tensor/cpu/cross_entropy.h: cross-entropy fused with log-softmax over the rows of
// [N, C] logits, and its backward. The targets are copied to the host (a synchronisation) to check
// them with the CPU's message and to count the rows a mean divides by.
#pragma once

#include "tensor/nograd/nn_ops.h"
#include "tensor/tensor.h"

namespace accel::cuda {

void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                   nograd::Reduction reduction);
void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, int64_t ignore_index, nograd::Reduction reduction);

}  // namespace accel::cuda
