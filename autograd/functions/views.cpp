// Differentiable views: the backward of a view reshapes, re-permutes, or scatters the grad into
// zeros of the input's shape (narrow's writes only the zeros around it).
#include <numeric>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// A view whose backward reshapes the grad back to the input's shape.
Tensor reshaping_view(const char* name, const Tensor& t, Tensor out) {
  record(name, {t}, {out}, [shape = t.shape()](const Grads& g) -> Grads { return {nograd::reshape(g[0], shape)}; });
  return out;
}

// A view that picks part of the input: the grad lands in that part of a zero tensor.
template <class ViewFn>
Tensor picking_view(const char* name, const Tensor& t, ViewFn view_of) {
  Tensor out = view_of(t);
  record(name, {t}, {out}, [shape = t.shape(), view_of](const Grads& g) -> Grads {
    Tensor grad = zeros(shape, g[0].dtype(), g[0].device());
    nograd::copy_(view_of(grad), g[0]);
    return {grad};
  });
  return out;
}

}  // namespace

Tensor view(const Tensor& t, const Shape& shape) { return reshaping_view("ViewBackward", t, nograd::view(t, shape)); }
Tensor reshape(const Tensor& t, const Shape& shape) {
  return reshaping_view("ReshapeBackward", t, nograd::reshape(t, shape));
}
Tensor squeeze(const Tensor& t, int64_t dim) { return reshaping_view("SqueezeBackward", t, nograd::squeeze(t, dim)); }
Tensor unsqueeze(const Tensor& t, int64_t dim) {
  return reshaping_view("UnsqueezeBackward", t, nograd::unsqueeze(t, dim));
}
Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  return reshaping_view("FlattenBackward", t, nograd::flatten(t, start_dim, end_dim));
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  Tensor out = nograd::transpose(t, dim0, dim1);
  record("TransposeBackward", {t}, {out},
         [dim0, dim1](const Grads& g) -> Grads { return {nograd::transpose(g[0], dim0, dim1)}; });
  return out;
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  Tensor out = nograd::permute(t, dims);
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[normalize_dim("permute", dims[i], t.dim())] = static_cast<int64_t>(i);
  record("PermuteBackward", {t}, {out}, [inverse](const Grads& g) -> Grads { return {nograd::permute(g[0], inverse)}; });
  return out;
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  Tensor out = nograd::narrow(t, dim, start, length);  // checks the arguments
  const int64_t d = t.dim() == 0 ? 0 : normalize_dim("narrow", dim, t.dim());
  const int64_t size = t.dim() == 0 ? 1 : t.shape()[d], first = start < 0 ? start + size : start;
  // Each element of the grad is written once: the view's grad in its place, zeros only around it (a
  // tied GPT-2 head narrows the 50304-row embedding to 50257 rows: zeroing it all first cost a pass).
  record("NarrowBackward", {t}, {out}, [shape = t.shape(), d, size, first, length](const Grads& g) -> Grads {
    Tensor grad = empty(shape, g[0].dtype(), g[0].device());
    nograd::copy_(nograd::narrow(grad, d, first, length), g[0]);
    if (first > 0) nograd::zero_(nograd::narrow(grad, d, 0, first));
    if (first + length < size) nograd::zero_(nograd::narrow(grad, d, first + length, size - first - length));
    return {grad};
  });
  return out;
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return picking_view("SliceBackward", t,
                      [=](const Tensor& x) { return nograd::slice(x, dim, start, end, step); });
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  return picking_view("SelectBackward", t, [=](const Tensor& x) { return nograd::select(x, dim, index); });
}

Tensor expand(const Tensor& t, const Shape& shape) {
  Tensor out = nograd::expand(t, shape);
  record("ExpandBackward", {t}, {out},
         [in = t.shape()](const Grads& g) -> Grads { return {nograd::sum_to_shape(g[0], in)}; });
  return out;
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<Tensor> pieces = nograd::split(t, sizes, dim);
  record("SplitBackward", {t}, pieces, [dim](const Grads& g) -> Grads { return {nograd::cat(g, dim)}; });
  return pieces;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& piece : nograd::split(t, split_size, dim)) sizes.push_back(piece.size(dim));
  return split(t, sizes, dim);
}

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = nograd::contiguous(t);
  record("ContiguousBackward", {t}, {out}, [](const Grads& g) -> Grads { return {g[0]}; });
  return out;
}

}  // namespace accel
