// CUDA layer norm: one row kernel for the output (or the input grad), and for the weight/bias grads
// a partial-sums kernel and a finishing kernel over a workspace from the caching allocator.
#include "tensor/cuda/layer_norm.h"

#include "kernels/nn.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/scratch.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

const void* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mutable_data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps) {
  const int64_t dim = x.shape().back(), rows = x.numel() / dim;
  const DeviceGuard guard(x.device());
  kernels::launch_layer_norm(x.dtype(), out.data_ptr(), mean.data_ptr(), rstd.data_ptr(), x.data_ptr(),
                             data_or_null(weight), data_or_null(bias), rows, dim, eps, compute_stream(x.device()));
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight) {
  const int64_t dim = x.shape().back(), rows = x.numel() / dim;
  const DeviceGuard guard(x.device());
  const cudaStream_t stream = compute_stream(x.device());
  kernels::launch_layer_norm_backward_input(x.dtype(), grad_input.data_ptr(), grad_out.data_ptr(), x.data_ptr(),
                                            mean.data_ptr(), rstd.data_ptr(), data_or_null(weight), rows, dim,
                                            stream);
  if (!grad_weight.defined() && !grad_bias.defined()) return;
  const size_t workspace_bytes =
      2 * static_cast<size_t>(kernels::layer_norm_param_chunks(rows) * dim) * dtype_size(mean.dtype());
  const Scratch workspace(workspace_bytes, x.device());
  kernels::launch_layer_norm_backward_params(x.dtype(), mutable_data_or_null(grad_weight),
                                             mutable_data_or_null(grad_bias), grad_out.data_ptr(), x.data_ptr(),
                                             mean.data_ptr(), rstd.data_ptr(), rows, dim, workspace.get(), stream);
}

}  // namespace accel::cuda
