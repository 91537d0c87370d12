// CUDA matrix products through cuBLASLt, f32 accumulation for f32/f16/bf16 (f64 for f64): the twin
// of cpu::matmul, and a bias-epilogue form for the Linear layer.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

// out = a @ b. out is contiguous [B..., M, N]; a is [B..., M, K] and b is [B..., K, N] with the same
// batch dims B (broadcast ones have stride 0). Transposed operands are read in place; batches go to
// one strided-batched call where the batch dims coalesce.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// out = a @ b + bias, with bias [N] (out's dtype) added in the GEMM's epilogue rather than by a
// second pass over out.
void matmul_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);

// How many GEMM calls went to classic cuBLAS because cuBLASLt declined the layout (a diagnostic:
// the GPU tests print it, and the benchmark's products must not need it).
int64_t classic_gemm_calls();

}  // namespace accel::cuda
