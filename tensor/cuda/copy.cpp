// CUDA copies. Bytes cross the bus in the source's dtype and layout made contiguous, at the
// source's own (pre-broadcast) shape; broadcasting, strides and casts are applied on the side that
// writes dst: by the cast kernel on a device, by cpu::copy on the host.
#include "tensor/cuda/copy.h"

#include <fmt/format.h>

#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "tensor/cpu/copy.h"
#include "tensor/creation.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/launch.h"
#include "tensor/cuda/pinned.h"
#include "tensor/cuda/stream.h"
#include "tensor/nograd/views.h"

namespace accel::cuda {

namespace {

// dst's own bytes can take src's bytes as they are.
bool same_layout(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.is_contiguous() && src.is_contiguous();
}

void copy_on_device(const Tensor& dst, const Tensor& src) {
  const DeviceGuard guard(dst.device());
  const cudaStream_t stream = compute_stream(dst.device());
  if (same_layout(dst, src)) {
    if (dst.data_ptr() != src.data_ptr())
      ACCEL_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream),
                       "cudaMemcpyAsync({} bytes, device to device)", dst.nbytes());
    return;
  }
  for_each_launch<2>(dst, {&src}, [&](const kernels::StridedArgs<2>& args) {
    kernels::launch_cast(dst.dtype(), src.dtype(), args, stream);
  });
}

void copy_host_to_device(const Tensor& dst, const Tensor& src) {
  const Tensor host = nograd::contiguous(src);
  if (same_layout(dst, host)) {
    upload(dst.data_ptr(), host.data_ptr(), host.nbytes(), dst.device());
    return;
  }
  const Tensor staged = empty(host.shape(), host.dtype(), dst.device());
  upload(staged.data_ptr(), host.data_ptr(), host.nbytes(), dst.device());
  copy_on_device(dst, staged);
}

void copy_device_to_host(const Tensor& dst, const Tensor& src) {
  const Tensor device_src = nograd::contiguous(src);
  if (same_layout(dst, device_src)) {
    download(dst.data_ptr(), device_src.data_ptr(), device_src.nbytes(), src.device());
    return;
  }
  const Tensor host = empty(device_src.shape(), device_src.dtype(), Device::cpu());
  download(host.data_ptr(), device_src.data_ptr(), device_src.nbytes(), src.device());
  cpu::copy(dst, host);
}

// Rare (one process per GPU is the rule), so kept simple: both streams are synchronised around a
// peer copy, which leaves no cross-stream hazard for the caching allocators of either device.
void copy_between_devices(const Tensor& dst, const Tensor& src) {
  const Tensor device_src = nograd::contiguous(src);
  const Tensor staged = empty(device_src.shape(), device_src.dtype(), dst.device());
  {
    const DeviceGuard guard(src.device());
    ACCEL_CUDA_CHECK(cudaStreamSynchronize(compute_stream(src.device())), "cudaStreamSynchronize(compute stream)");
  }
  const DeviceGuard guard(dst.device());
  const cudaStream_t stream = compute_stream(dst.device());
  ACCEL_CUDA_CHECK(cudaMemcpyPeerAsync(staged.data_ptr(), dst.device().index, device_src.data_ptr(),
                                       src.device().index, device_src.nbytes(), stream),
                   "cudaMemcpyPeerAsync({} bytes, {} to {})", device_src.nbytes(), src.device().str(),
                   dst.device().str());
  ACCEL_CUDA_CHECK(cudaStreamSynchronize(stream), "cudaStreamSynchronize(compute stream)");
  copy_on_device(dst, staged);
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const Device to = dst.device(), from = src.device();
  if (to.is_cuda()) check_device("copy_", to);
  if (from.is_cuda()) check_device("copy_", from);
  if (to.is_cuda() && from.is_cuda()) {
    if (to == from) copy_on_device(dst, src);
    else copy_between_devices(dst, src);
  } else if (to.is_cuda()) {
    copy_host_to_device(dst, src);
  } else {
    copy_device_to_host(dst, src);
  }
}

}  // namespace accel::cuda
