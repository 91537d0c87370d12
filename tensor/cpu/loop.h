// The CPU strided loop under every elementwise op: coalesces dims, splits the index space across
// OpenMP threads, and hands each thread runs of one row so the inner loop can vectorise.
// In deterministic mode the split is into fixed blocks instead (see split_fixed).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "tensor/deterministic.h"
#include "tensor/shape.h"

namespace accel::cpu {

// Below this many elements a loop runs on one thread: waking the team costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Deterministic mode's block: the split of an index space depends on its size alone. A multiple of
// 16 elements, like parallel_ranges' split, so blocks of f32 output start on a cache line.
inline constexpr int64_t kFixedBlock = 4096;

// Calls f(begin, end) on the blocks [i * kFixedBlock, (i + 1) * kFixedBlock) of [0, n), spread over
// the threads when n reaches the grain. Where one element's arithmetic may depend on where its range
// starts or ends (a vector loop's scalar head and tail), the result then does not depend on the
// thread count.
template <class F>
void split_fixed(int64_t n, F&& f) {
  const int64_t blocks = (n + kFixedBlock - 1) / kFixedBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain && blocks > 1)
  for (int64_t i = 0; i < blocks; ++i) f(i * kFixedBlock, std::min(n, (i + 1) * kFixedBlock));
}

template <size_t N>
struct LoopLayout {
  Shape shape;
  std::array<Strides, N> strides;  // element strides of each operand, broadcast to shape
};

// Drops size-1 dims and merges dims that are contiguous with each other in every operand.
template <size_t N>
LoopLayout<N> coalesce(const Shape& shape, const std::array<Strides, N>& strides) {
  LoopLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!out.shape.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) mergeable &= out.strides[k].back() == strides[k][d] * shape[d];
      if (mergeable) {
        out.shape.back() *= shape[d];
        for (size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
        continue;
      }
    }
    out.shape.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
  }
  if (out.shape.empty()) {  // a single element
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Calls row(offsets, steps, n) over runs of the innermost dim: operand k's elements are at
// offsets[k] + j * steps[k] for j in [0, n). Runs may be split between threads, so row must only
// write elements it is given.
template <size_t N, class Row>
void for_each_row(const Shape& shape, const std::array<Strides, N>& strides, Row&& row) {
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const LoopLayout<N> layout = coalesce<N>(shape, strides);
  const int64_t ndim = static_cast<int64_t>(layout.shape.size());
  const int64_t inner = layout.shape.back();
  std::array<int64_t, N> steps;
  for (size_t k = 0; k < N; ++k) steps[k] = layout.strides[k].back();

  auto run_range = [&](int64_t begin, int64_t end) {
    int64_t idx = begin;
    while (idx < end) {
      // Decompose idx into coordinates to find each operand's offset for this run.
      std::array<int64_t, N> offsets{};
      int64_t rest = idx / inner;
      const int64_t j = idx % inner;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        const int64_t c = rest % layout.shape[d];
        rest /= layout.shape[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += c * layout.strides[k][d];
      }
      for (size_t k = 0; k < N; ++k) offsets[k] += j * steps[k];
      const int64_t n = std::min(inner - j, end - idx);
      row(offsets, steps, n);
      idx += n;
    }
  };

  if (deterministic_mode()) {
    split_fixed(numel, run_range);
    return;
  }
  const int threads = numel >= kParallelGrain ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    run_range(0, numel);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (numel + nt - 1) / nt;
    const int64_t begin = std::min(numel, t * chunk), end = std::min(numel, begin + chunk);
    run_range(begin, end);
  }
}

// Calls f(begin, end) on disjoint ranges covering [0, n): one range when n is below the grain, else one
// per thread, split at multiples of 16 elements so no two threads share a cache line of f32 output.
template <class F>
void parallel_ranges(int64_t n, F&& f) {
  if (n <= 0) return;
  if (deterministic_mode()) {
    split_fixed(n, f);
    return;
  }
  const int threads = n >= kParallelGrain ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) f(begin, end);
  }
}

}  // namespace accel::cpu
