// CPU softmax and log-softmax over the middle dim of a contiguous [outer, size, inner] tensor, and
// their backward passes.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// out and x are contiguous with the same shape; is_log selects log-softmax.
void softmax(const Tensor& out, const Tensor& x, int64_t outer, int64_t size, int64_t inner, bool is_log);
// grad_in = d/dx given grad_out and the forward's out (all contiguous, one shape).
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t outer,
                      int64_t size, int64_t inner, bool is_log);

// Causal softmax of scale * x over the last dim of a contiguous [..., tq, tk] x: row i of each matrix
// covers columns [0, i + tk - tq]; the rest of out is 0. The backward computes
// scale * out * (grad_out - sum(grad_out * out)) per row.
void causal_softmax(const Tensor& out, const Tensor& x, int64_t tq, int64_t tk, double scale);
void causal_softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, double scale);

}  // namespace accel::cpu
