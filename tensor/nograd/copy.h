// Raw copy ops: copy between layouts, dtypes and devices; cat, stack and index_select.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel::nograd {

// Writes src into dst, broadcasting src to dst's shape and casting to dst's dtype (f16/bf16 round
// to nearest even); dst and src may be on different devices.
void copy_(const Tensor& dst, const Tensor& src);
Tensor clone(const Tensor& t);  // a contiguous copy
// t itself when it already has the dtype / device.
Tensor to_dtype(const Tensor& t, DType dtype);
Tensor to_device(const Tensor& t, Device device);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Rows index[i] of dim; index is a 1-d i64 or i32 tensor.
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);

}  // namespace accel::nograd
