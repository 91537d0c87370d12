// The cuBLASLt handle and GEMM workspace of each device, created on first use.
#pragma once

#include <cublasLt.h>

#include <cstddef>

namespace accel::cuda {

cublasLtHandle_t blaslt_handle(int device);

struct BlasWorkspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};
// Used on the compute stream only (so one per device suffices): 32 MiB on Hopper and later, 4 MiB
// before, as NVIDIA advises for cublasLtMatmul.
BlasWorkspace blas_workspace(int device);

}  // namespace accel::cuda
