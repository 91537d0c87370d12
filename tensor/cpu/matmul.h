// CPU matrix product over Eigen maps of the operands' own buffers, and the layout rule that lets a
// transposed or column-sliced operand be read in place.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace accel::cpu {

// How a strided [rows, cols] matrix is handed to Eigen: as a row-major or column-major map whose
// outer stride is the distance between rows (columns), or, when neither dim has unit stride, copied.
enum class GemmLayout { row_major, col_major, copy };

struct MatrixLayout {
  GemmLayout layout = GemmLayout::copy;
  int64_t outer_stride = 0;  // in elements; 0 for copy
};

MatrixLayout gemm_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);
// The layout of the last two dims of t.
MatrixLayout gemm_layout(const Tensor& t);

// out = a @ b. out is contiguous [B..., M, N]; a is [B..., M, K] and b is [B..., K, N] with the same
// batch dims B (broadcast ones have stride 0). f64/f32 go to Eigen as they are; f16/bf16 are widened
// to f32, multiplied with f32 accumulation and rounded once into out.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);

// out = x @ weight^T + bias for out contiguous [rows, n], x [rows, k] and weight [n, k] (any strides),
// bias [n] or undefined: one GEMM accumulating into out after out is filled with the bias rows.
// f16/bf16 accumulate in f32 and round once into out.
void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias);

// Which library runs the whole-product GEMMs: "OpenBLAS 0.3.21 (...config...)" or "Eigen 3.4.0"
// (deterministic mode's tiles are always Eigen's).
std::string gemm_library();

}  // namespace accel::cpu
