// Shape and stride helpers.
#include "tensor/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/error.h"

namespace accel {

std::optional<int64_t> add_checked(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> mul_checked(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

int64_t shape_numel(const Shape& shape, const char* op) {
  for (int64_t s : shape)
    if (s == 0) return 0;  // however large the other dims are
  int64_t n = 1;
  for (int64_t s : shape) {
    const std::optional<int64_t> next = mul_checked(n, s);
    if (!next) throw Error(fmt::format("{}: shape {} has more elements than int64 can count", op, shape_str(shape)));
    n = *next;
  }
  return n;
}

Strides contiguous_strides(const Shape& shape, const char* op) {
  Strides strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    if (i == 0) break;  // the product of every dim is no stride
    const std::optional<int64_t> next = mul_checked(running, std::max<int64_t>(shape[i], 1));
    if (!next) throw Error(fmt::format("{}: shape {} has strides that overflow int64", op, shape_str(shape)));
    running = *next;
  }
  return strides;
}

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t normalize_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  if (dim < lo || dim > hi)
    throw Error(fmt::format("{}: dim {} out of range for a tensor of rank {} (expected {}..{})", op, dim, ndim, lo, hi));
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(fmt::format("{}: shapes {} and {} cannot broadcast (dim {}: {} vs {})", op, shape_str(a),
                              shape_str(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& from, const Strides& strides, const Shape& to) {
  Strides out(to.size(), 0);
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) out[lead + i] = from[i] == 1 ? 0 : strides[i];
  return out;
}

}  // namespace accel
