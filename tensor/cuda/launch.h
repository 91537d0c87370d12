// Turns tensors into the StridedArgs of elementwise launches: broadcasts the inputs to the output's
// shape, coalesces dims (as the CPU loop does), marks the dense fast path, and splits layouts the
// kernels cannot take in one launch (more than kMaxDims dims, or more elements than the strided
// kernel's 32-bit indexing) into several launches. No CUDA calls, so CPU tests cover it.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/strided_args.h"
#include "tensor/cpu/loop.h"
#include "tensor/tensor.h"

namespace accel::cuda {

// Calls launch(args) for each piece of the iteration space of `shape`; operand k starts at data[k]
// (bytes), has element size elsize[k] and element strides strides[k] (already broadcast to shape).
template <int N, class Launch>
void for_each_launch(const Shape& shape, const std::array<Strides, N>& strides, const std::array<char*, N>& data,
                     const std::array<size_t, N>& elsize, Launch&& launch) {
  using kernels::kMaxDims;
  if (shape_numel(shape) == 0) return;
  const cpu::LoopLayout<N> layout = cpu::coalesce<N>(shape, strides);
  const int ndim = static_cast<int>(layout.shape.size());
  const int inner = ndim < kMaxDims ? ndim : kMaxDims;
  const int lead = ndim - inner;

  kernels::StridedArgs<N> args;
  args.ndim = inner;
  args.numel = 1;
  for (int d = 0; d < inner; ++d) {
    args.sizes[d] = layout.shape[lead + d];
    args.numel *= args.sizes[d];
    for (int k = 0; k < N; ++k) args.strides[k][d] = layout.strides[k][lead + d];
  }

  // Runs one launch over the trailing `inner` dims from the given operand starts, cutting it along
  // its outermost dim when it has more elements than a strided launch may index.
  auto emit = [&](const std::array<char*, N>& start) {
    bool dense = inner == 1 && (args.numel == 1 || args.strides[0][0] == 1);
    for (int k = 1; k < N && dense; ++k) dense = args.strides[k][0] == 0 || args.strides[k][0] == 1 || args.numel == 1;
    for (int k = 0; k < N && dense && args.numel > 1; ++k)
      dense = args.strides[k][0] == 0 || reinterpret_cast<uintptr_t>(start[k]) % 16 == 0;
    kernels::StridedArgs<N> piece = args;
    piece.dense = dense;
    if (dense || args.numel <= kernels::kMaxStridedElements) {
      for (int k = 0; k < N; ++k) piece.data[k] = start[k];
      launch(piece);
      return;
    }
    const int64_t rows = args.sizes[0];
    const int64_t row_numel = args.numel / rows;
    const int64_t rows_per_piece = std::max<int64_t>(1, kernels::kMaxStridedElements / row_numel);
    for (int64_t r = 0; r < rows; r += rows_per_piece) {
      piece.sizes[0] = std::min(rows_per_piece, rows - r);
      piece.numel = piece.sizes[0] * row_numel;
      for (int k = 0; k < N; ++k)
        piece.data[k] = start[k] + r * args.strides[k][0] * static_cast<int64_t>(elsize[k]);
      launch(piece);
    }
  };

  if (lead == 0) {
    emit(data);
    return;
  }
  // More dims than a kernel takes: walk the leading ones here, one launch per index.
  int64_t lead_count = 1;
  for (int d = 0; d < lead; ++d) lead_count *= layout.shape[d];
  for (int64_t i = 0; i < lead_count; ++i) {
    std::array<char*, N> start = data;
    int64_t rest = i;
    for (int d = lead - 1; d >= 0; --d) {
      const int64_t c = rest % layout.shape[d];
      rest /= layout.shape[d];
      for (int k = 0; k < N; ++k) start[k] += c * layout.strides[k][d] * static_cast<int64_t>(elsize[k]);
    }
    emit(start);
  }
}

// The same for tensors: out first, then the inputs, each broadcast to out's shape.
template <int N, class Launch>
void for_each_launch(const Tensor& out, const std::array<const Tensor*, N - 1>& inputs, Launch&& launch) {
  std::array<Strides, N> strides;
  std::array<char*, N> data;
  std::array<size_t, N> elsize;
  strides[0] = out.strides();
  data[0] = static_cast<char*>(out.data_ptr());
  elsize[0] = dtype_size(out.dtype());
  for (int k = 1; k < N; ++k) {
    const Tensor& t = *inputs[k - 1];
    strides[k] = broadcast_strides(t.shape(), t.strides(), out.shape());
    data[k] = static_cast<char*>(t.data_ptr());
    elsize[k] = dtype_size(t.dtype());
  }
  for_each_launch<N>(out.shape(), strides, data, elsize, launch);
}

}  // namespace accel::cuda
