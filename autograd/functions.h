// Differentiable ops: each runs the raw op of tensor/nograd and, when grad mode is on and an input
// requires grad, records a node whose backward is written beside it. This is the op set users call.
#pragma once

#include <concepts>
#include <optional>
#include <vector>

#include "tensor/cross_entropy_options.h"
#include "tensor/generator.h"
#include "tensor/reduction.h"
#include "tensor/tensor.h"

namespace accel {

// Views (share storage with the input).
Tensor view(const Tensor& t, const Shape& shape);
Tensor reshape(const Tensor& t, const Shape& shape);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim);
Tensor contiguous(const Tensor& t);

// Copies, casts and joins.
Tensor clone(const Tensor& t);
Tensor to(const Tensor& t, DType dtype);
// to(t, dtype) under the raw op's name (nograd::to_dtype).
Tensor to_dtype(const Tensor& t, DType dtype);
Tensor to(const Tensor& t, Device device);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
// A handle to the same data, cut from the graph.
Tensor detach(const Tensor& t);

// Elementwise arithmetic and math, with broadcasting.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// pow's grads are PyTorch's limits at the corners: d/da = 0 wherever the exponent is 0 (0^0 included)
// and d/db = 0 where a = 0 and b >= 0; other corners keep the formulas' inf/NaN, as PyTorch's do.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Scalar forms: the scalar takes a's dtype and device (mul(x, 2.0) is x * 2.0).
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor neg(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor gelu(const Tensor& t);  // tanh approximation
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& t, const Tensor& mask, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& t);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// Comparisons and masks: bool results, which carry no grad.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor isfinite(const Tensor& t);
Tensor logical_not(const Tensor& t);

// Reductions (an empty dims list reduces everything).
Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum(const Tensor& t);
Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& t);
// Grad flows to the maximal (minimal) elements, shared equally between ties, as torch.amax/amin and
// a full torch.max() share it (torch.max(t, dim) does not: see max(t, dim) below). A NaN wins.
Tensor max(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& t);
Tensor min(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor min(const Tensor& t);
// The index (i64) of the first maximum (minimum) along dim.
Tensor argmax(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim = false);

// max and min over one dim with where they are: auto [values, indices] = max(logits, 1). values is
// max(t, {dim}, keepdim) and carries the grad; indices (i64) are argmax's (argmin's), the first of a tie.
// Differs from PyTorch on purpose: torch.max(t, dim) gives a tie's whole grad to the returned index;
// here it is shared between the tied elements (as torch.amax shares it), so it does not depend on
// which tie the index names.
struct ValuesAndIndices {
  Tensor values, indices;
};
ValuesAndIndices max_along(const Tensor& t, int64_t dim, bool keepdim = false);
ValuesAndIndices min_along(const Tensor& t, int64_t dim, bool keepdim = false);
// A template so that a braced list keeps naming the dims overload: max(t, {1}) deduces no D and stays
// the values-only reduction, while max(t, 1) is this one.
template <std::integral D>
ValuesAndIndices max(const Tensor& t, D dim, bool keepdim = false) {
  return max_along(t, static_cast<int64_t>(dim), keepdim);
}
template <std::integral D>
ValuesAndIndices min(const Tensor& t, D dim, bool keepdim = false) {
  return min_along(t, static_cast<int64_t>(dim), keepdim);
}

Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias with x [..., in], weight [out, in], bias [out] or undefined (nograd::linear).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Neural-network ops.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Softmax over the last dim of scale * x with the future masked out (nograd::causal_softmax).
Tensor causal_softmax(const Tensor& x, double scale);
// Causal self-attention fused per head on the CPU (nograd::causal_attention): q, k, v [B, T, H, D] ->
// [B, T, H, D], keeping each query's log-sum-exp for backward instead of the [B, H, T, T] weights.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Rows of weight [num, dim] at indices; the padding_idx row (negative counts from the end) gets no
// grad, as in PyTorch's F.embedding.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// logits [N, C] against class indices [N]; nn::cross_entropy takes [..., C]. The options are PyTorch's
// (tensor/cross_entropy_options.h): cross_entropy(x, t, {.weight = w, .label_smoothing = 0.1}). The grad
// flows to the logits only. Differs from PyTorch on purpose: the loss is f32 for f16/bf16 logits, and
// a mean over nothing (every target ignored, or zero total weight) is 0, not NaN.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);
// Always drops: a module decides whether it is training.
Tensor dropout(const Tensor& x, double p, Generator& gen);

}  // namespace accel
