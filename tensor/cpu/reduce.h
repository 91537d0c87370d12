// CPU reductions over the trailing `inner` elements of each of `outer` contiguous rows.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

enum class ReduceOp { sum, mean, max, min };

// in is contiguous [outer, inner]; out is contiguous [outer] of the reduction dtype.
void reduce_rows(ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t inner);
// Floating sum or mean over the middle dim of a contiguous [outer, size, inner] tensor into a contiguous
// [outer, inner] out, accumulating in f64: a reduction over leading dims (a bias grad) without first
// transposing the input.
void reduce_columns(ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t size, int64_t inner);
// out[o] = index of the first maximum (argmax) or minimum (argmin) of row o (i64); a NaN counts as
// both, as max and min let it win.
void argmax_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner);
void argmin_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner);

}  // namespace accel::cpu
