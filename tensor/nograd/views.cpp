// Raw view ops: shape and stride arithmetic only.
#include "tensor/nograd/views.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "tensor/nograd/copy.h"

namespace accel::nograd {

namespace {

Tensor restride(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  return Tensor::make_view(t.storage(), std::move(shape), std::move(strides), offset, t.dtype());
}

Shape infer_shape(const char* op, const Tensor& t, const Shape& requested) {
  Shape shape = requested;
  int64_t infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw Error(fmt::format("{}: only one -1 allowed in shape {}", op, shape_str(requested)));
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw Error(fmt::format("{}: negative size in shape {}", op, shape_str(requested)));
    }
  }
  // The dims given must count no more elements than int64 can, whatever the -1 turns out to be.
  int64_t known = 1;
  for (int64_t d : shape) {
    if (d == -1) continue;
    const std::optional<int64_t> product = mul_checked(known, d);
    if (!product && std::find(shape.begin(), shape.end(), 0) == shape.end())
      throw Error(fmt::format("{}: shape {} has more elements than int64 can count", op, shape_str(requested)));
    known = product.value_or(0);
  }
  if (infer_at >= 0) {
    if (known == 0 || t.numel() % known != 0)
      throw Error(fmt::format("{}: cannot infer -1 in shape {} for {} elements (input {})", op,
                              shape_str(requested), t.numel(), shape_str(t.shape())));
    shape[infer_at] = t.numel() / known;
  }
  if (shape_numel(shape, op) != t.numel())
    throw Error(fmt::format("{}: shape {} has {} elements but the input {} has {}", op, shape_str(requested),
                            shape_numel(shape, op), shape_str(t.shape()), t.numel()));
  return shape;
}

// Strides that view t's storage with the new shape, or none when the layout does not allow it
// (the algorithm of PyTorch's computeStride: match chunks of contiguous old dims to new dims).
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape) {
  if (old_shape.empty()) return Strides(shape.size(), 1);
  const int64_t numel = shape_numel(old_shape);
  if (numel == 0) return contiguous_strides(shape, "view");
  Strides strides(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

}  // namespace

Tensor view(const Tensor& t, const Shape& requested) {
  const Shape shape = infer_shape("view", t, requested);
  auto strides = view_strides(t.shape(), t.strides(), shape);
  if (!strides)
    throw Error(fmt::format("view: cannot view {} with strides {} as {}; use reshape (copies) or contiguous first",
                            shape_str(t.shape()), shape_str(t.strides()), shape_str(shape)));
  return restride(t, shape, *strides, t.offset());
}

Tensor reshape(const Tensor& t, const Shape& requested) {
  const Shape shape = infer_shape("reshape", t, requested);
  if (auto strides = view_strides(t.shape(), t.strides(), shape)) return restride(t, shape, *strides, t.offset());
  return view(clone(t), shape);
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  const int64_t d0 = normalize_dim("transpose", dim0, t.dim()), d1 = normalize_dim("transpose", dim1, t.dim());
  if (t.dim() == 0) return t;
  Shape shape = t.shape();
  Strides strides = t.strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return restride(t, shape, strides, t.offset());
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  if (static_cast<int64_t>(dims.size()) != t.dim())
    throw Error(fmt::format("permute: got {} dims {} for a tensor of rank {} ({})", dims.size(), shape_str(dims),
                            t.dim(), shape_str(t.shape())));
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim("permute", dims[i], t.dim());
    if (seen[d]) throw Error(fmt::format("permute: dim {} repeated in {}", d, shape_str(dims)));
    seen[d] = true;
    shape[i] = t.shape()[d];
    strides[i] = t.strides()[d];
  }
  return restride(t, shape, strides, t.offset());
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  const int64_t d = normalize_dim("narrow", dim, t.dim());
  const int64_t size = t.dim() == 0 ? 1 : t.shape()[d];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start > size || length > size - start)
    throw Error(fmt::format("narrow: start {} length {} out of range for dim {} of size {} (shape {})", start, length,
                            d, size, shape_str(t.shape())));
  Shape shape = t.shape();
  shape[d] = length;
  return restride(t, shape, t.strides(), t.offset() + start * t.strides()[d]);
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t d = normalize_dim("slice", dim, t.dim());
  if (step <= 0) throw Error(fmt::format("slice: step must be positive, got {}", step));
  const int64_t size = t.shape()[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape[d] = (end - start) / step + ((end - start) % step != 0);  // ceil without overflow
  // With one element or none, the step never moves, so a step whose stride overflows is harmless.
  if (const std::optional<int64_t> stride = mul_checked(strides[d], step)) strides[d] = *stride;
  else if (shape[d] > 1)
    throw Error(fmt::format("slice: step {} of dim {} (stride {}) overflows int64", step, d, strides[d]));
  return restride(t, shape, strides, t.offset() + start * t.strides()[d]);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  const int64_t d = normalize_dim("select", dim, t.dim());
  const int64_t size = t.shape()[d];
  if (index < -size || index >= size)
    throw Error(fmt::format("select: index {} out of range for dim {} of size {}", index, d, size));
  if (index < 0) index += size;
  Shape shape = t.shape();
  Strides strides = t.strides();
  const int64_t offset = t.offset() + index * strides[d];
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return restride(t, shape, strides, offset);
}

Tensor expand(const Tensor& t, const Shape& requested) {
  if (requested.size() < t.shape().size())
    throw Error(fmt::format("expand: target {} has fewer dims than the input {}", shape_str(requested),
                            shape_str(t.shape())));
  const size_t lead = requested.size() - t.shape().size();
  Shape shape(requested.size());
  Strides strides(requested.size(), 0);
  for (size_t i = 0; i < requested.size(); ++i) {
    if (i < lead) {
      if (requested[i] < 0)
        throw Error(fmt::format("expand: -1 not allowed for a new leading dim in {}", shape_str(requested)));
      shape[i] = requested[i];
      continue;
    }
    const int64_t have = t.shape()[i - lead];
    const int64_t want = requested[i] == -1 ? have : requested[i];
    if (have == want) {
      shape[i] = have;
      strides[i] = t.strides()[i - lead];
    } else if (have == 1) {
      shape[i] = want;
    } else {
      throw Error(fmt::format("expand: cannot expand {} to {} (dim {}: {} is not 1)", shape_str(t.shape()),
                              shape_str(requested), i, have));
    }
  }
  shape_numel(shape, "expand");  // a view of stride 0 costs nothing, but numel() must still count it
  return restride(t, shape, strides, t.offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  const int64_t d = normalize_dim("squeeze", dim, t.dim());
  if (t.dim() == 0 || t.shape()[d] != 1) return t;
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return restride(t, shape, strides, t.offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  const int64_t d = normalize_dim("unsqueeze", dim, t.dim() + 1);
  Shape shape = t.shape();
  Strides strides = t.strides();
  const int64_t stride = d < t.dim() ? shape[d] * strides[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return restride(t, shape, strides, t.offset());
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  const int64_t s = normalize_dim("flatten", start_dim, t.dim()), e = normalize_dim("flatten", end_dim, t.dim());
  if (s > e) throw Error(fmt::format("flatten: start_dim {} after end_dim {}", s, e));
  Shape shape(t.shape().begin(), t.shape().begin() + s);
  shape.push_back(std::accumulate(t.shape().begin() + s, t.shape().begin() + e + 1, int64_t{1}, std::multiplies<>()));
  shape.insert(shape.end(), t.shape().begin() + e + 1, t.shape().end());
  return reshape(t, shape);
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  const int64_t d = normalize_dim("split", dim, t.dim());
  if (split_size <= 0) throw Error(fmt::format("split: split_size must be positive, got {}", split_size));
  std::vector<Tensor> pieces;
  const int64_t size = t.shape()[d];
  for (int64_t start = 0; start < size; start += split_size)
    pieces.push_back(narrow(t, d, start, std::min(split_size, size - start)));
  return pieces;
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = normalize_dim("split", dim, t.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    const std::optional<int64_t> sum = add_checked(total, s);
    if (!sum) throw Error(fmt::format("split: sizes {} add up to more than int64 can count", shape_str(sizes)));
    total = *sum;
  }
  if (total != t.shape()[d])
    throw Error(fmt::format("split: sizes {} sum to {} but dim {} has size {}", shape_str(sizes), total, d,
                            t.shape()[d]));
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw Error(fmt::format("split: negative size in {}", shape_str(sizes)));
    pieces.push_back(narrow(t, d, start, s));
    start += s;
  }
  return pieces;
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

}  // namespace accel::nograd
