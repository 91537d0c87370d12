// CPU index_select: whole rows of a contiguous [outer, size, inner] tensor picked along its middle dim.
#pragma once

#include "tensor/tensor.h"

namespace accel::cpu {

// out is contiguous [outer, n, inner] for the n (contiguous, i64 or i32) indices; src is contiguous
// [outer, size, inner]. Throws accel::Error naming the first index outside [0, size) of dim.
void index_select(const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim, int64_t outer,
                  int64_t size, int64_t inner);

}  // namespace accel::cpu
