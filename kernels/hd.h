// ACCEL_HD marks math shared by the CPU path and the CUDA kernels, so CPU tests cover GPU numerics.
#pragma once

#if defined(__CUDACC__)
#define ACCEL_HD __host__ __device__ __forceinline__
#else
#define ACCEL_HD inline
#endif
