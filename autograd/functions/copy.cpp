// Differentiable copies, casts, device moves and joins.
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

Tensor detach(const Tensor& t) {
  if (!t.defined()) return t;
  return Tensor::make_view(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
}

Tensor clone(const Tensor& t) {
  Tensor out = nograd::clone(t);
  record("CloneBackward", {t}, {out}, [](const Grads& g) -> Grads { return {g[0]}; });
  return out;
}

Tensor to(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = nograd::to_dtype(t, dtype);
  record("ToDTypeBackward", {t}, {out},
         [from = t.dtype()](const Grads& g) -> Grads { return {nograd::to_dtype(g[0], from)}; });
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) { return to(t, dtype); }

Tensor to(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor out = nograd::to_device(t, device);
  record("ToDeviceBackward", {t}, {out},
         [from = t.device()](const Grads& g) -> Grads { return {nograd::to_device(g[0], from)}; });
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = nograd::cat(tensors, dim);
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) sizes.push_back(t.size(dim));
  record("CatBackward", tensors, {out}, [sizes, dim](const Grads& g) -> Grads { return nograd::split(g[0], sizes, dim); });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = nograd::stack(tensors, dim);
  const int64_t d = normalize_dim("stack", dim, out.dim());
  record("StackBackward", tensors, {out}, [d](const Grads& g) -> Grads {
    Grads grads;
    for (const Tensor& piece : nograd::split(g[0], 1, d)) grads.push_back(nograd::squeeze(piece, d));
    return grads;
  });
  return out;
}

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  Tensor out = nograd::index_select(t, dim, index);
  const int64_t d = normalize_dim("index_select", dim, t.dim());
  record("IndexSelectBackward", {t}, {out},
         [d, shape = t.shape(), rows = nograd::to_dtype(index, DType::i64).to_vector<int64_t>()](const Grads& g) -> Grads {
           Tensor grad = zeros(shape, g[0].dtype(), g[0].device());
           for (size_t i = 0; i < rows.size(); ++i)
             nograd::add_(nograd::select(grad, d, rows[i]), nograd::select(g[0], d, static_cast<int64_t>(i)));
           return {grad};
         });
  return out;
}

}  // namespace accel
