// The FP8 GEMM of delayed scaling on cuBLASLt (sm_89 and later: Ada, Hopper): e4m3 x e4m3 or e4m3 x
// e5m2 operands with their dequantisation scales, f32 accumulation, a bf16 or f32 output and its amax;
// and the CUDA quantise kernel that makes the operands.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

// True when device is a visible CUDA device that runs FP8 GEMMs: compute capability 8.9 or newer.
// Never throws.
bool fp8_gemm_supported(Device device);
// Throws accel::Error naming op, the GPU and its compute capability unless fp8_gemm_supported(device).
void check_fp8_gemm_device(const char* op, Device device);

// out [M, N] = (a * a_scale_inv) @ (b * b_scale_inv)^T, plus out's old values when accumulate (how a
// bias gets in: out starts as the broadcast bias). a is [M, K] and b is [N, K], both contiguous fp8 on
// out's device (not both e5m2); the scale_invs are one-element f32 device tensors; out is contiguous
// f32 or bf16. M, N and K must be multiples of 16 and the pointers 16-byte aligned (cuBLASLt's FP8
// rules; its "TN" layout is exactly two K-contiguous operands). amax, when defined (one f32 element on
// the device), is set to max |out| after the product: by cuBLASLt where it offers that for the output
// type, else by one extra pass over out.
void fp8_gemm(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
              const Tensor& b_scale_inv, const Tensor& amax, bool accumulate = false);

// out = fp8(in * scale) (out f8_e4m3 or f8_e5m2, in f64/f32/f16/bf16, same shape, both contiguous, on
// one CUDA device) with kernels/float8.h's rounding and saturation; amax (one f32 element) is set to
// max |in|, NaN counted as +inf. out may be undefined for the amax alone.
void fp8_quantize(const Tensor& out, const Tensor& in, float scale, const Tensor& amax);

// How many fp8_gemm calls computed the output amax in the extra pass (a diagnostic for the GPU tests).
int64_t fp8_gemm_amax_passes();

}  // namespace accel::cuda
