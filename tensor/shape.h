// Shape and stride helpers: element counts, contiguous strides, dim normalisation, broadcasting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accel {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);
// "[2, 3]"; the form every error message uses.
std::string shape_str(const std::vector<int64_t>& shape);
// Maps dim in [-ndim, ndim) to [0, ndim); throws "op: dim d out of range for a tensor of rank n".
int64_t normalize_dim(const char* op, int64_t dim, int64_t ndim);
// The broadcast of two shapes (numpy rules); throws "op: shapes ... cannot broadcast".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides that read a tensor of shape `from` (with strides) as if it had broadcast shape `to`.
Strides broadcast_strides(const Shape& from, const Strides& strides, const Shape& to);

}  // namespace accel
