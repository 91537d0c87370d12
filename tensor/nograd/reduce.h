// Raw reductions over dims with keepdim. Floating sums accumulate in f64 on the CPU; integer and
// bool sums give i64; max and min keep the dtype and let NaN win. An empty dims list reduces over
// every dim.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel::nograd {

Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum(const Tensor& t);
Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& t);
Tensor max(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& t);
Tensor min(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor min(const Tensor& t);
// Index of the first maximum (minimum) along dim, as i64. A NaN counts as both, as in max and min.
Tensor argmax(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim = false);
// Sums t down to shape, undoing a broadcast (the backward of every broadcasting op).
Tensor sum_to_shape(const Tensor& t, const Shape& shape);

}  // namespace accel::nograd
