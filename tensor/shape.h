// Shape and stride helpers: element counts and strides checked against int64 overflow, dim
// normalisation, broadcasting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// The element count of shape: the product of its dims, 0 when one of them is 0. Throws accel::Error
// naming op when the product does not fit in int64:
//   "empty: shape [1099511627776, 1099511627776] has more elements than int64 can count"
int64_t shape_numel(const Shape& shape, const char* op = "shape_numel");
// Row-major strides of shape. A dim of 0 leaves the tensor empty, but the strides are still products
// of the other dims, so those must fit in int64 too; throws "op: shape [...] has strides that
// overflow int64" otherwise.
Strides contiguous_strides(const Shape& shape, const char* op = "contiguous_strides");
// a + b and a * b, or nullopt when the exact result does not fit in int64.
std::optional<int64_t> add_checked(int64_t a, int64_t b);
std::optional<int64_t> mul_checked(int64_t a, int64_t b);
// "[2, 3]"; the form every error message uses.
std::string shape_str(const std::vector<int64_t>& shape);
// Maps dim in [-ndim, ndim) to [0, ndim); throws "op: dim d out of range for a tensor of rank n".
int64_t normalize_dim(const char* op, int64_t dim, int64_t ndim);
// The broadcast of two shapes (numpy rules); throws "op: shapes ... cannot broadcast".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides that read a tensor of shape `from` (with strides) as if it had broadcast shape `to`.
Strides broadcast_strides(const Shape& from, const Strides& strides, const Shape& to);

}  // namespace accel
