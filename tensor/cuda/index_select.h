// CUDA twin of tensor/cpu/index_select.h: whole rows of a contiguous [outer, size, inner] tensor
// picked along its middle dim by a gather kernel. The index is copied to the host (a
// synchronisation) to check it with the CPU's message.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

void index_select(const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim, int64_t outer,
                  int64_t size, int64_t inner);

}  // namespace accel::cuda
