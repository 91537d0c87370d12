// Row-wise kernel building blocks shared by softmax, layer norm and cross-entropy: a "group" of
// threads owns one row (a warp for short rows, the whole block for long ones) and reduces across
// itself in a fixed tree order, so results depend on the shape only, never on timing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/nn_math.h"
#include "kernels/row_plan.h"

namespace accel::kernels {

inline constexpr unsigned kFullMask = 0xffffffffu;

// A softmax row's running (max, sum of exp(x - max)).
template <class C>
struct MaxSum {
  C max, sum;
};

template <class A>
__device__ __forceinline__ A shfl_down(A v, int offset) {
  return __shfl_down_sync(kFullMask, v, offset);
}
template <class C>
__device__ __forceinline__ MaxSum<C> shfl_down(MaxSum<C> v, int offset) {
  return MaxSum<C>{__shfl_down_sync(kFullMask, v.max, offset), __shfl_down_sync(kFullMask, v.sum, offset)};
}
template <class A>
__device__ __forceinline__ A shfl_first(A v) {
  return __shfl_sync(kFullMask, v, 0);
}
template <class C>
__device__ __forceinline__ MaxSum<C> shfl_first(MaxSum<C> v) {
  return MaxSum<C>{__shfl_sync(kFullMask, v.max, 0), __shfl_sync(kFullMask, v.sum, 0)};
}

struct SumOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
// The CPU loops take std::max(m, x), which skips a NaN x; so does this.
struct MaxOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a < b ? b : a;
  }
};
struct MaxSumOp {
  template <class C>
  __device__ MaxSum<C> operator()(MaxSum<C> a, MaxSum<C> b) const {
    online_softmax_combine(a.max, a.sum, b.max, b.sum);
    return a;
  }
};

// Reduces v over the row's group and returns the result to every thread of the group. A group is a
// warp (kWarpGroup, several rows per block) or the whole block (one row per block); in the second case
// every thread of the block must call this, and `scratch` is 32 elements of shared memory.
template <class A, class Op>
__device__ __forceinline__ A group_reduce(A v, int group, const Op& op, A* scratch) {
#pragma unroll
  for (int offset = kWarpGroup / 2; offset > 0; offset /= 2) v = op(v, shfl_down(v, offset));
  if (group <= kWarpGroup) return shfl_first(v);
  const int lane = static_cast<int>(threadIdx.x) % kWarpGroup, warp = static_cast<int>(threadIdx.x) / kWarpGroup;
  const int warps = group / kWarpGroup;
  __syncthreads();  // the previous reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Every warp combines the warp results in the same order, so all threads get the same value.
  A w = scratch[0];
  for (int i = 1; i < warps; ++i) w = op(w, scratch[i]);
  return w;
}

// Shared memory for group_reduce over A, one per kernel.
template <class A>
__device__ __forceinline__ A* reduce_scratch() {
  __shared__ alignas(16) unsigned char raw[kWarpGroup * 16];
  static_assert(sizeof(A) <= 16, "reduce_scratch holds up to 16 bytes per warp");
  return reinterpret_cast<A*>(raw);
}

// The row a thread works on and its index within the row's group.
struct RowSlot {
  int64_t row;
  int lane;
};
__device__ __forceinline__ RowSlot row_slot(int group) {
  const int rows_per_block = static_cast<int>(blockDim.x) / group;
  return RowSlot{static_cast<int64_t>(blockIdx.x) * rows_per_block + static_cast<int>(threadIdx.x) / group,
                 static_cast<int>(threadIdx.x) % group};
}

// Calls f.template operator()<K>() for k in {1, 2, 4, 8, 16} up to MaxK (the cached kernels' vectors
// per thread, a template argument so the row lives in registers).
template <int MaxK, class F>
void with_k(int k, F&& f) {
  switch (k) {
    case 1: f.template operator()<1>(); return;
    case 2: if constexpr (MaxK >= 2) f.template operator()<2>(); return;
    case 4: if constexpr (MaxK >= 4) f.template operator()<4>(); return;
    case 8: if constexpr (MaxK >= 8) f.template operator()<8>(); return;
    case 16: if constexpr (MaxK >= 16) f.template operator()<16>(); return;
    default: return;
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace accel::kernels
