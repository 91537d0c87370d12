// Device discovery and the current-device guard.
#include "tensor/cuda/device.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <mutex>

#include "kernels/cuda_check.h"
#include "kernels/error.h"

namespace accel::cuda {

namespace {

struct DeviceCount {
  int count = 0;
  std::string reason;
};

const DeviceCount& counted() {
  static const DeviceCount result = [] {
    DeviceCount c;
    const cudaError_t err = cudaGetDeviceCount(&c.count);
    if (err != cudaSuccess) {
      cudaGetLastError();
      c.count = 0;
      c.reason = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    } else if (c.count == 0) {
      c.reason = "cudaGetDeviceCount: no CUDA device";
    }
    return c;
  }();
  return result;
}

}  // namespace

int device_count() { return counted().count; }
bool is_available() { return device_count() > 0; }
std::string unavailable_reason() { return counted().reason; }

void check_device(const char* op, Device device) {
  if (!device.is_cuda())
    throw Error(fmt::format("{}: expected a CUDA device, got {}", op, device.str()));
  const int count = device_count();
  if (count == 0)
    throw Error(fmt::format("{}: {} is not available: no CUDA device is visible ({})", op, device.str(),
                            unavailable_reason()));
  if (device.index < 0 || device.index >= count)
    throw Error(fmt::format("{}: {} is not available: {} CUDA device{} visible", op, device.str(), count,
                            count == 1 ? " is" : "s are"));
}

DeviceProperties device_properties(int device) {
  cudaDeviceProp prop{};
  ACCEL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties({})", device);
  DeviceProperties p;
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.multiprocessors = prop.multiProcessorCount;
  p.total_memory = prop.totalGlobalMem;
  p.l2_cache = static_cast<size_t>(prop.l2CacheSize);
  return p;
}

CudaVersions versions() {
  CudaVersions v;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) {
    cudaGetLastError();
    v.runtime = 0;
  }
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) {
    cudaGetLastError();
    v.driver = 0;
  }
  v.cublas = cublasLtGetVersion();
  return v;
}

DeviceGuard::DeviceGuard(int device) : current_(device) {
  ACCEL_CUDA_CHECK(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) ACCEL_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice({})", device);
}

DeviceGuard::~DeviceGuard() {
  // A destructor must not throw; restoring the previous device only fails if the driver is gone.
  if (previous_ != current_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace accel::cuda
