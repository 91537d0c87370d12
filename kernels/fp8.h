// Launchers of the FP8 quantisation kernels, declared in plain C++ for tensor/cuda: the cast to e4m3 or
// e5m2 with a per-tensor scale that also yields the tensor's amax, and the amax pass alone (for a GEMM
// output whose amax cuBLASLt does not compute).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace accel::kernels {

inline constexpr int kFp8Threads = 256;
inline constexpr int64_t kFp8MaxBlocks = 1024;  // grid-stride beyond this: the amax atomics stay few

// out[i] = fp8(in[i] * scale) for i < n, rounded to nearest even and saturated by kernels/float8.h's
// cast (the CPU's), and *amax = max(*amax, max_i |in[i]|), NaN counted as +inf. in is contiguous f64,
// f32, f16 or bf16; out (out_dtype f8_e4m3 or f8_e5m2) is contiguous, or null for the amax alone. amax
// is one device float the caller has set (to 0 for a fresh max); only non-negative values go in it.
void launch_fp8_quantize(DType out_dtype, DType in_dtype, void* out, const void* in, int64_t n, float scale,
                         float* amax, cudaStream_t stream);

}  // namespace accel::kernels
