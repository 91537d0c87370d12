// CPU embedding lookup (a row gather) and its backward pass (a deterministic row scatter-add).
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// out is contiguous [n, dim] for the n (contiguous) indices; weight is contiguous [num, dim].
// Throws accel::Error naming the first index outside [0, num).
void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight is contiguous [num, dim]; grad_out contiguous [n, dim]. Row k of grad_weight sums the
// grad rows of the positions holding k in increasing position order, whatever the thread count.
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices);

}  // namespace accel::cpu
