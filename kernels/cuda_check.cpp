// Formatting of CUDA and cuBLAS failures into accel::Error.
#include "kernels/cuda_check.h"

#include <cublas_v2.h>

#include <fmt/format.h>

#include <climits>

#include "kernels/error.h"

namespace accel::cuda {

namespace {
std::string on_device(int device) { return device >= 0 ? fmt::format(" on cuda:{}", device) : std::string(); }
}  // namespace

void throw_cuda_error(cudaError_t err, const std::string& call, int device) {
  // Clear the error so that a caller who catches this can go on using the device (sticky errors,
  // such as an illegal address in a kernel, stay: CUDA allows nothing more on that device).
  cudaGetLastError();
  throw Error(fmt::format("{}{}: {} ({})", call, on_device(device), cudaGetErrorString(err), cudaGetErrorName(err)));
}

void throw_cublas_error(cublasStatus_t status, const std::string& call, int device) {
  throw Error(fmt::format("{}{}: {} ({})", call, on_device(device), cublasGetStatusString(status),
                          cublasGetStatusName(status)));
}

int current_device_or_none() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

void check_launch(const char* kernel) {
  ACCEL_CUDA_CHECK(cudaGetLastError(), "launch of kernel {}", kernel);
}

void check_grid(const char* kernel, int64_t blocks) {
  if (blocks > INT_MAX)
    throw Error(fmt::format("launch of kernel {}: {} blocks exceed the grid limit of {}", kernel, blocks, INT_MAX));
}

void check_strided_launch(const char* kernel, int64_t numel, int64_t limit) {
  if (numel > limit)
    throw Error(fmt::format("launch of kernel {}: {} elements in one strided launch, at most {}", kernel, numel, limit));
}

}  // namespace accel::cuda
