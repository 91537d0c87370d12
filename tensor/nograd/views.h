// Raw view ops: new shapes and strides over the same storage. No data moves except in
// reshape/contiguous when the layout does not allow a view. Not recorded by autograd.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel::nograd {

// shape may hold one -1, inferred from numel. view throws when the strides do not allow it.
Tensor view(const Tensor& t, const Shape& shape);
Tensor reshape(const Tensor& t, const Shape& shape);  // a view when possible, else a copy
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// Elements start, start+step, ... < end along dim (end is clamped to the size).
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Index `index` of dim, with that dim removed.
Tensor select(const Tensor& t, int64_t dim, int64_t index);
// Broadcasts size-1 dims (and new leading dims) to shape with stride 0; -1 keeps a size.
Tensor expand(const Tensor& t, const Shape& shape);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
// Pieces of split_size along dim (the last may be smaller), or pieces of the given sizes.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim);
// t itself when already contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& t);

}  // namespace accel::nograd
