// CUDA twins of tensor/cpu/reduce.h: reductions over the rows of a contiguous [outer, inner] tensor.
// Floating sums accumulate in f32 (f64 for f64), in a fixed tree order.
#pragma once

#include "tensor/cpu/reduce.h"
#include "tensor/tensor.h"

namespace accel::cuda {

// in is contiguous [outer, inner]; out is contiguous [outer] of the reduction dtype.
void reduce_rows(cpu::ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t inner);
// out[o] = index of the first maximum of row o (i64).
void argmax_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner);

}  // namespace accel::cuda
