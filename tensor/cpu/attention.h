// CPU causal self-attention in one pass per (batch, head): scores, the causal mask, the softmax and
// the values, with only each row's log-sum-exp kept for backward, which recomputes the weights.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// q, k, v: [B, T, H, D] of one floating dtype (f32 or f64), any strides with the last dim unit.
// out: contiguous [B, T, H, D]; lse: contiguous [B, H, T], log sum_j<=i exp(scale * q_i . k_j).
void causal_attention(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                      double scale);

// The gradients of out with respect to q, k and v (each contiguous [B, T, H, D]), from the forward's
// inputs, out and lse.
void causal_attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                               const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, double scale);

}  // namespace accel::cpu
