// CUDA and cuBLAS status checks: a failed call becomes an accel::Error that names the call, the
// device and the error, e.g.
//   "cudaMalloc(1073741824 bytes) on cuda:0: out of memory (cudaErrorMemoryAllocation)".
// At the kernels floor because the kernels check their own launches; tensor/cuda uses it for every call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace accel::cuda {

// Throws for err; `call` names the call and its arguments. device < 0 leaves the device out.
[[noreturn]] void throw_cuda_error(cudaError_t err, const std::string& call, int device);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const std::string& call, int device);

// The current device, or -1 when even that cannot be read (no driver).
int current_device_or_none();

// After a kernel launch: turns a launch failure (bad configuration, no kernel image for this GPU)
// into an Error naming the kernel.
void check_launch(const char* kernel);
// Grids here are one-dimensional; more blocks than CUDA allows is a caller bug worth a clear message.
void check_grid(const char* kernel, int64_t blocks);
// A strided launch over more than `limit` elements would overflow the kernel's 32-bit indexing.
void check_strided_launch(const char* kernel, int64_t numel, int64_t limit);

}  // namespace accel::cuda

// ACCEL_CUDA_CHECK(cudaMalloc(&p, n), "cudaMalloc({} bytes)", n): the message is only formatted on
// failure (files using the macros include <fmt/format.h>). The device named is the current one.
#define ACCEL_CUDA_CHECK(call, ...)                                                              \
  do {                                                                                           \
    const cudaError_t accel_cuda_err_ = (call);                                                  \
    if (accel_cuda_err_ != cudaSuccess)                                                          \
      ::accel::cuda::throw_cuda_error(accel_cuda_err_, ::fmt::format(__VA_ARGS__),               \
                                      ::accel::cuda::current_device_or_none());                  \
  } while (0)

#define ACCEL_CUBLAS_CHECK(call, ...)                                                            \
  do {                                                                                           \
    const cublasStatus_t accel_cublas_status_ = (call);                                          \
    if (accel_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::accel::cuda::throw_cublas_error(accel_cublas_status_, ::fmt::format(__VA_ARGS__),        \
                                        ::accel::cuda::current_device_or_none());                \
  } while (0)
