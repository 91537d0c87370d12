// Raw FP8 ops of delayed scaling, one entry point per device: quantise with a per-tensor scale (and the
// tensor's amax), dequantise, and the FP8 GEMM with f32 accumulation. On the CPU, and on a CUDA device
// or shape the FP8 GEMM cannot take, the GEMM is emulated: dequantise, then an f32 GEMM, rounded once to
// the output dtype. On sm_89+ with every dim a multiple of 16 it is cuBLASLt's FP8 GEMM.
#pragma once

#include "tensor/tensor.h"

namespace accel::nograd {

// An FP8 tensor as a GEMM reads it: value = data * scale_inv.
struct Fp8Tensor {
  Tensor data;       // f8_e4m3 or f8_e5m2, contiguous
  float scale = 1;   // the scale it was quantised with
  Tensor scale_inv;  // 1 / scale as one f32 element on data's device (cuBLASLt reads it from there)
};

// data = fp8_dtype(t * scale), rounded to nearest even and saturated to the format's range; t is f64,
// f32, f16 or bf16 on any device. amax, when given, gets max |t| (NaN as +inf on CUDA, as the amax
// history stores it; the CPU's max lets NaN through, which the history's record turns into +inf).
Fp8Tensor quantize_fp8(const Tensor& t, float scale, DType fp8_dtype, float* amax = nullptr);

// The f32 values an FP8 GEMM multiplies: to_dtype(data, f32) * (1 / scale).
Tensor dequantize_fp8(const Fp8Tensor& q);

// True where fp8_gemm runs cuBLASLt's FP8 GEMM for [m, k] x [n, k]^T on device: a CUDA device of
// compute capability 8.9 or newer and m, n, k positive multiples of 16. Never throws.
bool fp8_gemm_on_device(Device device, int64_t m, int64_t n, int64_t k);
// Throws accel::Error naming op and the GPU unless device is a CUDA device that runs FP8 GEMMs (sm_89+).
void check_fp8_gemm_device(const char* op, Device device);

// out [M, N] = dequantize(a) [M, K] @ dequantize(b)^T [K, N] + bias [N] (optional, any floating dtype)
// in out_dtype (f32 or bf16), on a's device; a and b are 2-d. amax, when given, gets max |out|.
Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b, const Tensor& bias, DType out_dtype, float* amax = nullptr);

}  // namespace accel::nograd
