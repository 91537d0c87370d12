// CUDA twins of tensor/cpu/embedding.h: the embedding lookup (a row gather) and its deterministic
// backward. Both copy the indices to the host first (a synchronisation) to check them with the CPU's
// message; the backward also groups positions by index there, as the CPU does, so each grad row sums
// its positions in increasing order without atomics.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices);

}  // namespace accel::cuda
