// CUDA softmax: the kernels (kernels/softmax.cu) pick their path from the shape.
#include "tensor/cuda/softmax.h"

#include "kernels/nn.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

void softmax(const Tensor& out, const Tensor& x, int64_t outer, int64_t size, int64_t inner, bool is_log) {
  const DeviceGuard guard(x.device());
  kernels::launch_softmax(x.dtype(), out.data_ptr(), x.data_ptr(), outer, size, inner, is_log,
                          compute_stream(x.device()));
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t outer,
                      int64_t size, int64_t inner, bool is_log) {
  const DeviceGuard guard(out.device());
  kernels::launch_softmax_backward(out.dtype(), grad_in.data_ptr(), grad_out.data_ptr(), out.data_ptr(), outer, size,
                                   inner, is_log, compute_stream(out.device()));
}

}  // namespace accel::cuda
