// Raw copy ops: entry points check shapes and devices, then dispatch to the CPU or CUDA copy.
#include "tensor/ops/copy.h"

#include <fmt/format.h>

#include <cstring>

#include "accel_config.h"
#include "tensor/cpu/copy.h"
#include "tensor/creation.h"
#include "tensor/ops/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/copy.h"
#endif

namespace accel::ops {

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
    shape[d] += t.shape()[d];
  }
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
  const Tensor idx = to_device(to_dtype(index, DType::i64), Device::cpu());
  const std::vector<int64_t> rows = idx.to_vector<int64_t>();
  const int64_t size = t.shape()[d];
  for (int64_t r : rows)
    if (r < 0 || r >= size)
      throw Error(fmt::format("index_select: index {} out of range for dim {} of size {}", r, d, size));
  Shape shape = t.shape();
  shape[d] = static_cast<int64_t>(rows.size());
  Tensor out = empty(shape, t.dtype(), t.device());
  if (d == 0 && t.is_contiguous() && t.device().is_cpu()) {  // the data loader's case: whole rows
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(std::max<int64_t>(size, 1));
    const char* src = static_cast<const char*>(t.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (size_t i = 0; i < rows.size(); ++i) std::memcpy(dst + i * row_bytes, src + rows[i] * row_bytes, row_bytes);
    return out;
  }
  for (size_t i = 0; i < rows.size(); ++i) copy_(select(out, d, static_cast<int64_t>(i)), select(t, d, rows[i]));
  return out;
}

}  // namespace accel::ops
