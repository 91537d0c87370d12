// Raw copy ops: entry points check shapes and devices, then dispatch to the CPU or CUDA copy.
#include "tensor/nograd/copy.h"

#include <fmt/format.h>

#include <optional>

#include "accel_config.h"
#include "tensor/cpu/copy.h"
#include "tensor/cpu/index_select.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/copy.h"
#include "tensor/cuda/index_select.h"
#endif

namespace accel::nograd {

void copy_(const Tensor& dst, const Tensor& src) {
  ACCEL_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  if (broadcast_shapes("copy_", dst.shape(), src.shape()) != dst.shape())
    throw Error(fmt::format("copy_: source {} does not broadcast to destination {}", shape_str(src.shape()),
                            shape_str(dst.shape())));
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    cpu::copy(dst, src);
    return;
  }
#if ACCEL_WITH_CUDA
  cuda::copy(dst, src);
#else
  throw Error(fmt::format("copy_: cannot copy from {} to {}: accel was built without CUDA", src.device().str(),
                          dst.device().str()));
#endif
}

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_(out, t);
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_(out, t);
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor out = empty(t.shape(), t.dtype(), device);
  copy_(out, t);
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("cat: got an empty list of tensors");
  const Tensor& first = tensors.front();
  if (first.dim() == 0) throw Error("cat: cannot concatenate 0-d tensors; use stack");
  const int64_t d = normalize_dim("cat", dim, first.dim());
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same = t.dim() == first.dim() && t.dtype() == first.dtype() && t.device() == first.device();
    for (int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.shape()[k] == first.shape()[k];
    if (!same)
      throw Error(fmt::format("cat: tensor {} is {} {} on {}, expected {} {} on {} matching except in dim {}", i,
                              dtype_name(t.dtype()), shape_str(t.shape()), t.device().str(),
                              dtype_name(first.dtype()), shape_str(first.shape()), first.device().str(), d));
    const std::optional<int64_t> size = add_checked(shape[d], t.shape()[d]);
    if (!size)
      throw Error(fmt::format("cat: dim {} of the {} tensors adds up to more than int64 can count", d, tensors.size()));
    shape[d] = *size;
  }
  shape_numel(shape, "cat");
  Tensor out = empty(shape, first.dtype(), first.device());
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    copy_(narrow(out, d, start, t.shape()[d]), t);
    start += t.shape()[d];
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw Error("stack: got an empty list of tensors");
  const int64_t d = normalize_dim("stack", dim, tensors.front().dim() + 1);
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors.front().shape())
      throw Error(fmt::format("stack: tensor {} has shape {}, expected {} like tensor 0", i,
                              shape_str(tensors[i].shape()), shape_str(tensors.front().shape())));
    expanded.push_back(unsqueeze(tensors[i], d));
  }
  return cat(expanded, d);
}

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  const int64_t d = normalize_dim("index_select", dim, t.dim());
  if (index.dim() != 1 || (index.dtype() != DType::i64 && index.dtype() != DType::i32))
    throw Error(fmt::format("index_select: index must be a 1-d i64 or i32 tensor, got {} {}",
                            dtype_name(index.dtype()), shape_str(index.shape())));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i < d) outer *= t.shape()[i];
    if (i > d) inner *= t.shape()[i];
  }
  Shape shape = t.shape();
  shape[d] = index.numel();
  Tensor out = empty(shape, t.dtype(), t.device());
  // The index may live elsewhere (a CPU index into a device tensor); the kernel reads it where t is.
  const Tensor idx = contiguous(to_device(index, t.device()));
  ACCEL_DISPATCH("index_select", t.device(), index_select, out, contiguous(t), idx, d, outer, t.shape()[d], inner);
  return out;
}

}  // namespace accel::nograd
