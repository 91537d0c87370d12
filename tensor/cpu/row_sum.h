// Sums along one row for the CPU's row ops: blocks of interleaved partial sums, which the compiler
// vectorises, combined pairwise, so the rounding error grows as log n rather than n as in a running
// sum. The order depends on the row length only, never on threads.
#pragma once

#include <array>
#include <cstdint>

namespace accel::cpu {

inline constexpr int64_t kRowSumLanes = 16;   // partial sums per block: one AVX-512 vector of f32
inline constexpr int64_t kRowSumBlock = 256;  // terms per block before it splits in two

// The N sums over j in [begin, end) of terms(j), an std::array<C, N>.
template <int N, class C, class Terms>
std::array<C, N> row_sums(int64_t begin, int64_t end, const Terms& terms) {
  if (end - begin > kRowSumBlock) {
    const int64_t mid = begin + (end - begin) / 2 / kRowSumLanes * kRowSumLanes;
    std::array<C, N> left = row_sums<N, C>(begin, mid, terms);
    const std::array<C, N> right = row_sums<N, C>(mid, end, terms);
    for (int k = 0; k < N; ++k) left[k] += right[k];
    return left;
  }
  C lanes[N][kRowSumLanes] = {};
  int64_t j = begin;
  for (; j + kRowSumLanes <= end; j += kRowSumLanes) {
    for (int64_t l = 0; l < kRowSumLanes; ++l) {
      const std::array<C, N> t = terms(j + l);
      for (int k = 0; k < N; ++k) lanes[k][l] += t[k];
    }
  }
  for (int64_t l = 0; j < end; ++j, ++l) {  // the tail, one term per lane
    const std::array<C, N> t = terms(j);
    for (int k = 0; k < N; ++k) lanes[k][l] += t[k];
  }
  std::array<C, N> out;
  for (int k = 0; k < N; ++k) {
    for (int64_t width = kRowSumLanes / 2; width > 0; width /= 2)
      for (int64_t l = 0; l < width; ++l) lanes[k][l] += lanes[k][l + width];
    out[k] = lanes[k][0];
  }
  return out;
}

}  // namespace accel::cpu
