// How a row-wise kernel (softmax, layer norm, cross-entropy) spreads rows over the GPU: the size of
// the thread group that owns a row, and whether the row fits in that group's registers so that it is
// read from memory once. Plain C++ so the host plans launches without nvcc and CPU tests check it.
#pragma once

#include <cstdint>

namespace accel::kernels {

inline constexpr int kWarpGroup = 32;
inline constexpr int kRowBlockThreads = 256;  // block size when a warp owns a row (8 rows per block)
inline constexpr int kMaxGroup = 512;         // the largest group: one row per block of 512 threads

struct RowPlan {
  int group = kWarpGroup;        // threads per row: 32 (a warp), or a power of two up to kMaxGroup
  int threads = kRowBlockThreads;  // threads per block: a multiple of group
  bool cached = false;           // the row is held in registers: vectors of `vec` elements, k per thread
  int vec = 1;
  int k = 1;
  int64_t rows_per_block() const { return threads / group; }
  int64_t blocks(int64_t rows) const { return (rows + rows_per_block() - 1) / rows_per_block(); }
};

// size: row length; vec: elements per 16-byte load (0 when rows are not 16-byte aligned, or the dtype
// has no vector path); max_values: elements a thread may hold per cached operand. A row is cached when
// it splits into whole vectors and fits group * max_values; its group is the smallest that makes it fit,
// so each thread holds as many values as it may. Other rows stream: a warp each up to 1024 elements,
// a block of up to kMaxGroup threads beyond.
inline RowPlan plan_rows(int64_t size, int vec, int max_values) {
  RowPlan plan;
  int64_t group = kWarpGroup;
  if (vec > 0 && size % vec == 0 && size <= static_cast<int64_t>(kMaxGroup) * max_values) {
    while (group * max_values < size) group *= 2;
    const int64_t vectors = size / vec;
    int k = 1;
    while (static_cast<int64_t>(k) * group < vectors) k *= 2;
    plan.cached = true;
    plan.vec = vec;
    plan.k = k;
  } else {
    while (group < kMaxGroup && group * 32 < size) group *= 2;
  }
  plan.group = static_cast<int>(group);
  plan.threads = group == kWarpGroup ? kRowBlockThreads : static_cast<int>(group);
  return plan;
}

}  // namespace accel::kernels
