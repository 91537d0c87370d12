// Per-device cuBLASLt handles and workspaces, kept for the life of the process.
#include "tensor/cuda/blas.h"

#include <fmt/format.h>

#include <array>
#include <mutex>

#include "tensor/cuda/allocator.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/device.h"
#include "tensor/error.h"

namespace accel::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct DeviceBlas {
  cublasLtHandle_t handle = nullptr;
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
    b.workspace = {ptr, bytes};
    b.handle = handle;
  }
  return b;
}

}  // namespace

cublasLtHandle_t blaslt_handle(int device) { return blas_for(device).handle; }
BlasWorkspace blas_workspace(int device) { return blas_for(device).workspace; }

}  // namespace accel::cuda
