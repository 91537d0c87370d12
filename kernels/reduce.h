// Launchers of the row reductions (sum, mean, max, argmax over the rows of a contiguous
// [outer, inner] tensor) and the plan that spreads a reduction over the GPU, in plain C++ so the
// host sizes the workspace from it and CPU tests check it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace accel::kernels {

enum class RowReduce : uint8_t { sum, mean, max };

inline constexpr int64_t kReduceThreads = 256;
// Rows at most this long, or this many rows or more, get one warp per row.
inline constexpr int64_t kWarpRowMaxInner = 4096;
inline constexpr int64_t kWarpRowMinOuter = 2048;
// A long row is cut into chunks of this many elements, one block each.
inline constexpr int64_t kSplitChunk = 16384;

struct ReducePlan {
  bool warp_per_row = true;
  int64_t splits = 1;  // blocks per row when not warp_per_row; partials go to the workspace if > 1
};

inline ReducePlan plan_reduce_rows(int64_t outer, int64_t inner) {
  ReducePlan plan;
  if (inner <= kWarpRowMaxInner || outer >= kWarpRowMinOuter) return plan;
  plan.warp_per_row = false;
  plan.splits = (inner + kSplitChunk - 1) / kSplitChunk;
  return plan;
}

// Bytes of partial results the plan needs: one accumulator (8 bytes at most) per split per row.
inline size_t reduce_rows_workspace_bytes(const ReducePlan& plan, int64_t outer) {
  return plan.splits > 1 ? static_cast<size_t>(outer * plan.splits) * 8 : 0;
}

// in is contiguous [outer, inner] of in_dtype; out is contiguous [outer] of out_dtype (in_dtype for
// max and for floating sums, i64 for integral sums). workspace holds reduce_rows_workspace_bytes.
void launch_reduce_rows(RowReduce op, DType in_dtype, DType out_dtype, void* out, const void* in, int64_t outer,
                        int64_t inner, const ReducePlan& plan, void* workspace, cudaStream_t stream);
// out[o] = index of the first maximum of row o (a NaN counts as the maximum); inner > 0.
void launch_argmax_rows(DType in_dtype, int64_t* out, const void* in, int64_t outer, int64_t inner,
                        cudaStream_t stream);

}  // namespace accel::kernels
