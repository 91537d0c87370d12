// Raw fused causal self-attention and its backward (CPU): softmax(scale * q k^T, the future masked)
// v per head, in the [B, T, H, D] layout a fused qkv projection produces, so no head is transposed.
#pragma once

#include "tensor/tensor.h"

namespace accel::nograd {

// q, k, v: [B, T, H, D], one floating dtype, on the CPU. out is contiguous [B, T, H, D] in that dtype;
// lse ([B, H, T], f32, or f64 for f64) is each query's log-sum-exp of its scaled scores over the keys
// it sees: all backward needs besides the inputs and out, instead of the [B, H, T, T] weights.
// Halves are computed in f32 and rounded once into out.
struct CausalAttentionResult {
  Tensor out, lse;
};
CausalAttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);

struct CausalAttentionGrads {
  Tensor grad_q, grad_k, grad_v;  // contiguous [B, T, H, D], in q's dtype
};
CausalAttentionGrads causal_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const Tensor& out, const Tensor& lse, double scale);

}  // namespace accel::nograd
