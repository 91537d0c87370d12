// Per-device cuBLASLt handles and workspaces, kept for the life of the process.
#include "tensor/cuda/blas.h"

#include <fmt/format.h>

#include <array>
#include <mutex>

#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "tensor/cuda/allocator.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct DeviceBlas {
  cublasLtHandle_t handle = nullptr;
  cublasHandle_t classic = nullptr;
  BlasWorkspace workspace;
};

DeviceBlas& blas_for(int device) {
  check_device("cublasLt", Device::cuda(device));
  if (device >= kMaxDevices)
    throw Error(fmt::format("cublasLt: cuda:{} exceeds the {} devices accel supports", device, kMaxDevices));
  static std::mutex mutex;
  static auto* all = new std::array<DeviceBlas, kMaxDevices>();  // never destroyed, like the streams
  std::lock_guard<std::mutex> lock(mutex);
  DeviceBlas& b = (*all)[static_cast<size_t>(device)];
  if (b.handle == nullptr) {
    const DeviceGuard guard(device);
    const DeviceProperties props = device_properties(device);
    const size_t bytes = props.major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
    void* ptr = device_allocate(bytes, Device::cuda(device));
    cublasLtHandle_t handle = nullptr;
    const cublasStatus_t status = cublasLtCreate(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) {
      device_free(ptr, Device::cuda(device));
      throw_cublas_error(status, "cublasLtCreate", device);
    }
    cublasHandle_t classic = nullptr;
    cublasStatus_t classic_status = cublasCreate(&classic);
    if (classic_status == CUBLAS_STATUS_SUCCESS) classic_status = cublasSetStream(classic, compute_stream(device));
    if (classic_status == CUBLAS_STATUS_SUCCESS) classic_status = cublasSetWorkspace(classic, ptr, bytes);
    // cuBLAS's default, stated: routines that would use atomics (and lose bitwise reproducibility)
    // take their ordered form. With one stream and this workspace per handle, cuBLAS promises the same
    // bits on every run on the same GPU model and toolkit (docs/numerics.md).
    if (classic_status == CUBLAS_STATUS_SUCCESS)
      classic_status = cublasSetAtomicsMode(classic, CUBLAS_ATOMICS_NOT_ALLOWED);
    if (classic_status != CUBLAS_STATUS_SUCCESS) {
      if (classic != nullptr) cublasDestroy(classic);
      cublasLtDestroy(handle);
      device_free(ptr, Device::cuda(device));
      throw_cublas_error(classic_status, "cublasCreate", device);
    }
    b.workspace = {ptr, bytes};
    b.classic = classic;
    b.handle = handle;
  }
  return b;
}

}  // namespace

cublasLtHandle_t blaslt_handle(int device) { return blas_for(device).handle; }
cublasHandle_t blas_handle(int device) { return blas_for(device).classic; }
BlasWorkspace blas_workspace(int device) { return blas_for(device).workspace; }

}  // namespace accel::cuda
