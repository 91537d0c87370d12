// Checks of integer index inputs (embedding indices, cross-entropy targets, index_select rows) on host
// memory, and the grouping of embedding positions by index. Shared by the CPU ops and the CUDA ops
// (which copy the indices to the host first), so both devices reject the same inputs with the same
// message and sum embedding grads in the same order.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "kernels/error.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace accel::cpu {

// Calls f.template operator()<I>() with I the index type (the entry points allow i64 and i32 only).
template <class F>
void dispatch_index(DType dtype, const char* op, F&& f) {
  if (dtype == DType::i64) f.template operator()<int64_t>();
  else if (dtype == DType::i32) f.template operator()<int32_t>();
  else throw_unsupported_dtype(op, dtype, "i64 or i32");
}

// Throws for the first index outside [0, rows); runs before any parallel loop, where a throw would
// terminate the program.
template <class I>
void check_indices(const char* op, const I* idx, int64_t n, int64_t rows, const Shape& weight_shape) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= rows)
      throw Error(fmt::format("{}: indices[{}] = {} is out of range for {} rows (weight {})", op, i,
                              static_cast<int64_t>(idx[i]), rows, shape_str(weight_shape)));
}

// Checks every target and returns how many rows count towards a mean (those not ignore_index).
template <class I>
int64_t check_targets(const char* op, const I* target, int64_t rows, int64_t classes, int64_t ignore_index) {
  int64_t counted = 0;
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t t = static_cast<int64_t>(target[n]);
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes)
      throw Error(fmt::format("{}: target[{}] = {} is out of range for {} classes (ignore_index is {})", op, n, t,
                              classes, ignore_index));
    ++counted;
  }
  return counted;
}

// index_select's rows: every index must be in [0, size) of dim.
template <class I>
void check_select_indices(const I* idx, int64_t n, int64_t dim, int64_t size) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= size)
      throw Error(fmt::format("index_select: index {} out of range for dim {} of size {}", static_cast<int64_t>(idx[i]),
                              dim, size));
}

// Groups positions by index with a counting sort (indices already checked to be in [0, rows)): the
// positions holding k are order[start[k] .. start[k + 1]), in increasing order. Embedding's backward
// sums each group in this order on every device, which makes it deterministic.
template <class I>
void group_by_index(const I* idx, int64_t n, int64_t rows, std::vector<int64_t>& start, std::vector<int64_t>& order) {
  start.assign(static_cast<size_t>(rows) + 1, 0);
  order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[static_cast<size_t>(idx[i]) + 1];
  for (int64_t k = 0; k < rows; ++k) start[k + 1] += start[k];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[static_cast<size_t>(idx[i])]++] = i;
}

}  // namespace accel::cpu
