// Raw neural-network ops and their backward passes: softmax, log_softmax, layer_norm, embedding,
// fused cross-entropy and dropout. Halves read and write 16 bits and compute in f32.
#pragma once

#include <optional>

#include "tensor/cross_entropy_options.h"
#include "tensor/generator.h"
#include "tensor/reduction.h"
#include "tensor/tensor.h"

namespace accel::nograd {

using accel::Reduction;

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);

// Causal attention weights in one pass: softmax over the last dim of scale * x, where x is
// [..., Tq, Tk] (Tq <= Tk) and row i of each matrix sees columns j <= i + Tk - Tq only; the others come
// out exactly 0. Equals softmax(masked_fill(x * scale, future, -inf), -1) without its three passes.
Tensor causal_softmax(const Tensor& x, double scale);
// d/dx given grad_out and the forward's out: scale * out * (grad_out - sum(grad_out * out)) per row.
Tensor causal_softmax_backward(const Tensor& grad_out, const Tensor& out, double scale);

// Normalises over the last dim; weight and bias ([last dim]) may be undefined.
// mean and rstd (f32, or f64 for f64 input) have x's shape without its last dim.
struct LayerNormResult {
  Tensor out, mean, rstd;
};
LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
struct LayerNormGrads {
  Tensor grad_input, grad_weight, grad_bias;  // grad_weight/grad_bias undefined without weight/bias
};
LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight, const Tensor& bias);

// Rows of weight [num, dim] picked by integer indices of any shape: out is indices.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Sums grad rows into a [num_weights, dim] tensor in a fixed order (deterministic). The padding_idx
// row, if given (negative counts from the end, as in PyTorch), gets no grad: it comes out 0.
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx = std::nullopt);
// padding_idx in [-num_weights, num_weights) as a row index; op names the caller in the error.
int64_t normalize_padding_idx(const char* op, int64_t padding_idx, int64_t num_weights);

// logits [N, C], target [N] (i64 or i32). Targets equal to ignore_index add nothing and do not count
// towards the mean. With options, PyTorch's per-class weight and label_smoothing too (see
// tensor/cross_entropy_options.h); CUDA runs those two options as a composition of raw ops
// (cross_entropy_by_ops.h), the plain loss as one fused kernel.
// Two differences from PyTorch, on purpose: the loss is f32 for f32, f16 and bf16 logits (f64 for
// f64), where PyTorch returns the logits' dtype; and a mean over nothing (every target ignored, or
// counted targets whose weights sum to 0) is 0 with a 0 grad, where PyTorch gives NaN, so a batch of
// padding cannot poison a run.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);
// grad_loss has the loss's shape and dtype; returns d loss / d logits in logits' dtype.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                              int64_t ignore_index = -100, Reduction reduction = Reduction::mean);
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                              const CrossEntropyOptions& options);

// Zeroes each element with probability p and scales the rest by 1/(1-p). keep_mask is bool.
// Element i (row-major) is kept when random_uniform_at(seed, offset, i) >= p (dropout_keep in
// kernels/nn_math.h), identical on every device. The generator advances by uniform_blocks(numel)
// whatever p is; p = 0 returns x itself with an all-true mask, p = 1 zeros; p outside [0, 1] throws.
struct DropoutResult {
  Tensor out, keep_mask;
};
DropoutResult dropout(const Tensor& x, double p, Generator& gen);

}  // namespace accel::nograd
