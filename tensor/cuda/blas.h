// The cuBLASLt and cuBLAS handles and the GEMM workspace of each device, created on first use.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>

namespace accel::cuda {

cublasLtHandle_t blaslt_handle(int device);
// The classic cuBLAS handle, for products cuBLASLt has no algorithm for. It is bound to the device's
// compute stream and uses the same workspace (both only ever run on that stream).
cublasHandle_t blas_handle(int device);

struct BlasWorkspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};
// Used on the compute stream only (so one per device suffices): 32 MiB on Hopper and later, 4 MiB
// before, as NVIDIA advises for cublasLtMatmul.
BlasWorkspace blas_workspace(int device);

}  // namespace accel::cuda
