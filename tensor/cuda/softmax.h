// CUDA twins of tensor/cpu/softmax.h: softmax and log-softmax over the middle dim of a contiguous
// [outer, size, inner] tensor, and their backward passes, queued on the compute stream.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

void softmax(const Tensor& out, const Tensor& x, int64_t outer, int64_t size, int64_t inner, bool is_log);
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t outer,
                      int64_t size, int64_t inner, bool is_log);

}  // namespace accel::cuda
