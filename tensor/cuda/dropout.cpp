// CUDA dropout: one kernel draws the mask and scales the kept elements.
#include "tensor/cuda/dropout.h"

#include "kernels/nn.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

void dropout(const Tensor& out, const Tensor& keep_mask, const Tensor& x, float p, double scale, uint64_t seed,
             uint64_t offset) {
  const DeviceGuard guard(x.device());
  kernels::launch_dropout(x.dtype(), out.data_ptr(), static_cast<bool*>(keep_mask.data_ptr()), x.data_ptr(), x.numel(),
                          p, scale, seed, offset, compute_stream(x.device()));
}

}  // namespace accel::cuda
