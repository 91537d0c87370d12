// How a row-major product out[M, N] = a[M, K] @ b[K, N] maps onto cuBLAS's column-major GEMM:
// cuBLAS computes out^T (N x M) = b^T a^T, so b plays cuBLAS's A and a plays its B. A transposed
// view is read in place through the transpose flag; only an operand with no unit stride is copied.
// No CUDA calls, so CPU tests cover it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace accel::cuda {

// One operand as cuBLAS stores it: a column-major stored_rows x stored_cols matrix with leading
// dimension ld, used transposed or not.
struct GemmOperand {
  bool needs_copy = false;
  bool transpose = false;
  int64_t stored_rows = 0, stored_cols = 0, ld = 0;
};

// Our logical row-major rows x cols matrix with the given element strides, handed to cuBLAS as its
// transpose (cols x rows, column-major). A dim of size <= 1 is never stepped along, so its stride
// does not matter; ld must keep columns apart and be at least 1.
inline GemmOperand plan_gemm_operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  GemmOperand g;
  const bool unit_cols = cols <= 1 || col_stride == 1;
  const bool rows_apart = rows <= 1 || row_stride >= cols;
  if (unit_cols && rows_apart) {  // row-major storage is column-major storage of the transpose
    g.stored_rows = cols;
    g.stored_cols = rows;
    g.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
    return g;
  }
  const bool unit_rows = rows <= 1 || row_stride == 1;
  const bool cols_apart = cols <= 1 || col_stride >= rows;
  if (unit_rows && cols_apart) {  // column-major storage: hand it over transposed
    g.transpose = true;
    g.stored_rows = rows;
    g.stored_cols = cols;
    g.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
    return g;
  }
  g.needs_copy = true;
  return g;
}

// The largest power of two, at most 256, that divides every given byte address or stride: the
// alignment cuBLASLt may assume for an operand.
inline uint32_t gemm_alignment(std::initializer_list<uint64_t> values) {
  uint64_t bits = 256;
  for (uint64_t v : values) bits |= v;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

}  // namespace accel::cuda
