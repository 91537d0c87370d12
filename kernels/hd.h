// ACCEL_HD marks math shared by the CPU path and the CUDA kernels, so CPU tests cover GPU numerics.
#pragma once

#if defined(__CUDACC__)
#define ACCEL_HD __host__ __device__ __forceinline__
#else
#define ACCEL_HD inline
#endif

// ACCEL_HD for per-element math long enough that GCC would call it out of line (through the PLT,
// from a shared library), leaving the CPU loop around it scalar: it must inline into that loop.
#if defined(__CUDACC__)
#define ACCEL_HD_INLINE __host__ __device__ __forceinline__
#else
#define ACCEL_HD_INLINE inline __attribute__((always_inline))
#endif
