// Row reduction kernels: sum/mean/max accumulate in compute_t<T> (f32 for f32/f16/bf16, f64 for f64,
// i64 for integers) and argmax; the combine steps come from kernels/reduce_math.h. Short rows (or
// many rows) get a warp each; a few long rows are cut into chunks, one block per chunk, whose
// partials a second kernel combines. The order of every combine is fixed by the shape alone, so
// results are deterministic.
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/reduce.h"
#include "kernels/reduce_math.h"

namespace accel::kernels {

namespace reduce_detail {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = static_cast<int>(kReduceThreads) / kWarp;
constexpr int kUnroll = 8;

template <class A>
struct SumOp {
  __device__ A identity() const { return A(0); }
  __device__ A operator()(A a, A b) const { return apply_binary<BinaryOp::add>(a, b); }
};

template <class A>
struct MaxOp {
  __device__ A identity() const { return max_identity<A>(); }
  __device__ A operator()(A a, A b) const { return max_combine(a, b); }
};

template <class A, class Op>
__device__ __forceinline__ A warp_reduce(A v, const Op& op) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

template <class A>
__device__ __forceinline__ ArgMax<A> warp_argmax(ArgMax<A> v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    ArgMax<A> other;
    other.value = __shfl_down_sync(0xffffffffu, v.value, offset);
    other.index = __shfl_down_sync(0xffffffffu, v.index, offset);
    v = argmax_combine(v, other);
  }
  return v;
}

// Folds elements [begin, end) of row into acc, stepping by `step` from `first`, with kUnroll
// independent accumulators so the loads are in flight together.
template <class T, class A, class Op>
__device__ __forceinline__ A fold_range(const T* row, int64_t first, int64_t end, int64_t step, const Op& op) {
  A acc[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) acc[u] = op.identity();
  int64_t j = first;
  for (; j + (kUnroll - 1) * step < end; j += kUnroll * step) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = row[j + u * step];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] = op(acc[u], static_cast<A>(load(v[u])));
  }
  for (; j < end; j += step) acc[0] = op(acc[0], static_cast<A>(load(row[j])));
#pragma unroll
  for (int u = 1; u < kUnroll; ++u) acc[0] = op(acc[0], acc[u]);
  return acc[0];
}

template <class O, class A>
__device__ __forceinline__ O finish(A acc, bool mean, int64_t inner) {
  if constexpr (std::is_floating_point_v<A>) {
    if (mean) acc = acc / static_cast<A>(inner);
  } else {
    (void)mean;
    (void)inner;
  }
  return store<O>(acc);
}

// One warp per row.
template <class T, class O, class Op>
__global__ void __launch_bounds__(kReduceThreads)
    warp_rows_kernel(O* out, const T* in, int64_t outer, int64_t inner, bool mean, Op op) {
  using A = compute_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= outer) return;  // the whole warp leaves together, so the shuffles below stay full
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  A acc = fold_range<T, A>(in + row * inner, lane, inner, kWarp, op);
  acc = warp_reduce(acc, op);
  if (lane == 0) out[row] = finish<O>(acc, mean, inner);
}

// Block (s, o) folds chunk s of row o; with one split it writes the result, else a partial.
template <class T, class O, class Op>
__global__ void __launch_bounds__(kReduceThreads)
    split_rows_kernel(O* out, compute_t<T>* partials, const T* in, int64_t inner, bool mean, Op op) {
  using A = compute_t<T>;
  __shared__ A warp_results[kRowsPerBlock];
  const int64_t row = blockIdx.y, split = blockIdx.x, splits = gridDim.x;
  const int64_t begin = split * kSplitChunk;
  const int64_t end = begin + kSplitChunk < inner ? begin + kSplitChunk : inner;
  A acc = fold_range<T, A>(in + row * inner, begin + threadIdx.x, end, kReduceThreads, op);
  const int lane = static_cast<int>(threadIdx.x % kWarp), warp = static_cast<int>(threadIdx.x / kWarp);
  acc = warp_reduce(acc, op);
  if (lane == 0) warp_results[warp] = acc;
  __syncthreads();
  if (warp != 0) return;
  acc = lane < kRowsPerBlock ? warp_results[lane] : op.identity();
  acc = warp_reduce(acc, op);
  if (lane != 0) return;
  if (splits == 1) out[row] = finish<O>(acc, mean, inner);
  else partials[row * splits + split] = acc;
}

// One warp per row of partials [outer, splits].
template <class T, class O, class Op>
__global__ void __launch_bounds__(kReduceThreads)
    finish_partials_kernel(O* out, const compute_t<T>* partials, int64_t outer, int64_t splits, int64_t inner,
                           bool mean, Op op) {
  using A = compute_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= outer) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  A acc = fold_range<A, A>(partials + row * splits, lane, splits, kWarp, op);
  acc = warp_reduce(acc, op);
  if (lane == 0) out[row] = finish<O>(acc, mean, inner);
}

template <class T, class O, class Op>
void run_reduce(const char* name, O* out, const T* in, int64_t outer, int64_t inner, bool mean, const ReducePlan& plan,
                void* workspace, const Op& op, cudaStream_t stream) {
  using A = compute_t<T>;
  static_assert(sizeof(A) <= 8, "reduce_rows_workspace_bytes reserves 8 bytes per partial");
  const int64_t row_blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
  if (plan.warp_per_row) {
    cuda::check_grid(name, row_blocks);
    warp_rows_kernel<T, O, Op><<<static_cast<unsigned>(row_blocks), kReduceThreads, 0, stream>>>(out, in, outer, inner,
                                                                                                 mean, op);
    cuda::check_launch(name);
    return;
  }
  cuda::check_grid(name, plan.splits);
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(outer));
  A* partials = static_cast<A*>(workspace);
  split_rows_kernel<T, O, Op><<<grid, kReduceThreads, 0, stream>>>(out, partials, in, inner, mean, op);
  cuda::check_launch(name);
  if (plan.splits > 1) {
    finish_partials_kernel<T, O, Op><<<static_cast<unsigned>(row_blocks), kReduceThreads, 0, stream>>>(
        out, partials, outer, plan.splits, inner, mean, op);
    cuda::check_launch(name);
  }
}

// argmax: one warp per row, or one block per row for a few long rows.
template <class T>
__global__ void __launch_bounds__(kReduceThreads)
    argmax_warp_kernel(int64_t* out, const T* in, int64_t outer, int64_t inner) {
  using A = compute_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= outer) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const T* p = in + row * inner;
  ArgMax<A> best = argmax_identity<A>();
  for (int64_t j = lane; j < inner; j += kWarp) best = argmax_combine(best, ArgMax<A>{static_cast<A>(load(p[j])), j});
  best = warp_argmax(best);
  if (lane == 0) out[row] = best.index;
}

template <class T>
__global__ void __launch_bounds__(kReduceThreads) argmax_block_kernel(int64_t* out, const T* in, int64_t inner) {
  using A = compute_t<T>;
  __shared__ A values[kRowsPerBlock];
  __shared__ int64_t indices[kRowsPerBlock];
  const int64_t row = blockIdx.x;
  const T* p = in + row * inner;
  ArgMax<A> best = argmax_identity<A>();
  for (int64_t j = threadIdx.x; j < inner; j += kReduceThreads)
    best = argmax_combine(best, ArgMax<A>{static_cast<A>(load(p[j])), j});
  const int lane = static_cast<int>(threadIdx.x % kWarp), warp = static_cast<int>(threadIdx.x / kWarp);
  best = warp_argmax(best);
  if (lane == 0) {
    values[warp] = best.value;
    indices[warp] = best.index;
  }
  __syncthreads();
  if (warp != 0) return;
  best = lane < kRowsPerBlock ? ArgMax<A>{values[lane], indices[lane]} : argmax_identity<A>();
  best = warp_argmax(best);
  if (lane == 0) out[row] = best.index;
}

}  // namespace reduce_detail

void launch_reduce_rows(RowReduce op, DType in_dtype, DType out_dtype, void* out, const void* in, int64_t outer,
                        int64_t inner, const ReducePlan& plan, void* workspace, cudaStream_t stream) {
  using namespace reduce_detail;
  if (outer <= 0) return;
  const char* name = op == RowReduce::max ? "max" : op == RowReduce::mean ? "mean" : "sum";
  dispatch_all(in_dtype, name, [&]<class T>() {
    using A = compute_t<T>;
    // max keeps the dtype; sums keep floating dtypes and widen integers (and bool) to i64.
    using SumOut = std::conditional_t<std::is_floating_point_v<A>, T, int64_t>;
    const T* src = static_cast<const T*>(in);
    if (op == RowReduce::max) {
      if (out_dtype != in_dtype) throw_unsupported_dtype(name, out_dtype, dtype_name(in_dtype));
      run_reduce<T, T>(name, static_cast<T*>(out), src, outer, inner, false, plan, workspace, MaxOp<A>{}, stream);
    } else {
      if (out_dtype != dtype_of<SumOut>()) throw_unsupported_dtype(name, out_dtype, dtype_name(dtype_of<SumOut>()));
      run_reduce<T, SumOut>(name, static_cast<SumOut*>(out), src, outer, inner, op == RowReduce::mean, plan, workspace,
                            SumOp<A>{}, stream);
    }
  });
}

void launch_argmax_rows(DType in_dtype, int64_t* out, const void* in, int64_t outer, int64_t inner,
                        cudaStream_t stream) {
  using namespace reduce_detail;
  if (outer <= 0) return;
  dispatch_all(in_dtype, "argmax", [&]<class T>() {
    const T* src = static_cast<const T*>(in);
    if (inner <= kWarpRowMaxInner || outer >= kWarpRowMinOuter) {
      const int64_t blocks = (outer + kRowsPerBlock - 1) / kRowsPerBlock;
      cuda::check_grid("argmax", blocks);
      argmax_warp_kernel<T><<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(out, src, outer, inner);
    } else {
      cuda::check_grid("argmax", outer);
      argmax_block_kernel<T><<<static_cast<unsigned>(outer), kReduceThreads, 0, stream>>>(out, src, inner);
    }
    cuda::check_launch("argmax");
  });
}

}  // namespace accel::kernels
