// The elementwise engine under every map-like kernel: out[i] = f(in0[i], in1[i], ...) over the
// layout in StridedArgs. The dense path moves 16 bytes per operand per access and keeps kMapUnroll
// accesses in flight per thread; the strided path decomposes each index over up to kMaxDims dims in
// 32-bit arithmetic (tensor/cuda/launch.h keeps each strided launch within 2^31 elements).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cuda_check.h"
#include "kernels/strided_args.h"

namespace accel::kernels {

inline constexpr int kMapThreads = 256;
inline constexpr int kMapUnroll = 4;

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// One Vec per input type, held in registers between the loads and the math.
template <int V, class... T>
struct VecPack {};
template <int V, class T, class... Rest>
struct VecPack<V, T, Rest...> {
  Vec<T, V> head;
  VecPack<V, Rest...> tail;
};

template <size_t K, int V, class T, class... Rest>
__device__ __forceinline__ auto& pack_get(VecPack<V, T, Rest...>& p) {
  if constexpr (K == 0) return p.head;
  else return pack_get<K - 1>(p.tail);
}

template <size_t K, class T, class... Rest>
struct TypeAt {
  using type = typename TypeAt<K - 1, Rest...>::type;
};
template <class T, class... Rest>
struct TypeAt<0, T, Rest...> {
  using type = T;
};

template <class... T>
constexpr size_t max_size() {
  size_t m = 1;
  ((m = sizeof(T) > m ? sizeof(T) : m), ...);
  return m;
}

// Elements per access on the dense path: as many as fit 16 bytes of the widest operand.
template <class TOut, class... TIn>
constexpr int vec_width() {
  return static_cast<int>(16 / max_size<TOut, TIn...>());
}

// Loads input K of a dense round: a 16-byte access, or the one element of a broadcast input.
template <size_t K, class T, int V, class... All>
__device__ __forceinline__ void load_operand(VecPack<V, All...>& pack, const void* data, int64_t stride, int64_t e) {
  const T* p = static_cast<const T*>(data);
  if (stride == 0) {
    const T s = p[0];
#pragma unroll
    for (int j = 0; j < V; ++j) pack_get<K>(pack).v[j] = s;
  } else {
    pack_get<K>(pack) = *reinterpret_cast<const Vec<T, V>*>(p + e);
  }
}

// Dense path: element e of the block's tile is owned by thread (e / V) % blockDim for kMapUnroll
// rounds, so each round's accesses are contiguous across the block.
template <class F, class TOut, class... TIn, size_t... K>
__device__ __forceinline__ void dense_body(const F& f, const StridedArgs<1 + sizeof...(TIn)>& args,
                                           std::index_sequence<K...>) {
  constexpr int V = vec_width<TOut, TIn...>();
  constexpr int64_t kTile = static_cast<int64_t>(kMapThreads) * kMapUnroll * V;
  const int64_t tile_start = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t n = args.numel;
  TOut* out = static_cast<TOut*>(args.data[0]);
  if (tile_start + kTile <= n) {
    VecPack<V, TIn...> in[kMapUnroll];
#pragma unroll
    for (int u = 0; u < kMapUnroll; ++u) {
      const int64_t e = tile_start + (static_cast<int64_t>(u) * kMapThreads + threadIdx.x) * V;
      // Load every input of every round before any math or store: the loads overlap in flight,
      // and an in-place op (out aliasing an input) still reads each element before writing it.
      (load_operand<K, typename TypeAt<K, TIn...>::type>(in[u], args.data[K + 1], args.strides[K + 1][0], e), ...);
    }
    (void)in;
#pragma unroll
    for (int u = 0; u < kMapUnroll; ++u) {
      const int64_t e = tile_start + (static_cast<int64_t>(u) * kMapThreads + threadIdx.x) * V;
      Vec<TOut, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = f(pack_get<K>(in[u]).v[j]...);
      *reinterpret_cast<Vec<TOut, V>*>(out + e) = o;
    }
  } else {
    // The last, partial tile: one element at a time.
    for (int64_t e = tile_start + threadIdx.x; e < n; e += kMapThreads)
      out[e] = f(static_cast<const typename TypeAt<K, TIn...>::type*>(
          args.data[K + 1])[args.strides[K + 1][0] == 0 ? 0 : e]...);
  }
}

template <class F, class TOut, class... TIn>
__global__ void __launch_bounds__(kMapThreads) dense_kernel(F f, StridedArgs<1 + sizeof...(TIn)> args) {
  dense_body<F, TOut, TIn...>(f, args, std::index_sequence_for<TIn...>{});
}

// Strided path: one element per thread; occupancy, not unrolling, hides the latency here. Index
// math is 32-bit: the host splits larger layouts into launches of at most kMaxStridedElements.
template <class F, class TOut, class... TIn, size_t... K>
__device__ __forceinline__ void strided_body(const F& f, const StridedArgs<1 + sizeof...(TIn)>& args,
                                             std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(TIn);
  const uint32_t i = blockIdx.x * static_cast<uint32_t>(kMapThreads) + threadIdx.x;
  if (i >= static_cast<uint32_t>(args.numel)) return;
  int64_t offsets[N] = {};
  uint32_t rest = i;
  for (int d = args.ndim - 1; d > 0; --d) {
    const uint32_t size = static_cast<uint32_t>(args.sizes[d]);
    const uint32_t coord = rest % size;
    rest /= size;
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] += static_cast<int64_t>(coord) * args.strides[k][d];
  }
#pragma unroll
  for (int k = 0; k < N; ++k) offsets[k] += static_cast<int64_t>(rest) * args.strides[k][0];
  TOut* out = static_cast<TOut*>(args.data[0]);
  out[offsets[0]] = f(static_cast<const typename TypeAt<K, TIn...>::type*>(args.data[K + 1])[offsets[K + 1]]...);
}

template <class F, class TOut, class... TIn>
__global__ void __launch_bounds__(kMapThreads) strided_kernel(F f, StridedArgs<1 + sizeof...(TIn)> args) {
  strided_body<F, TOut, TIn...>(f, args, std::index_sequence_for<TIn...>{});
}

// Launches f over args on stream: out has storage type TOut, the inputs TIn... in order.
template <class TOut, class... TIn, class F>
void launch_map(const char* name, const F& f, const StridedArgs<1 + sizeof...(TIn)>& args, cudaStream_t stream) {
  if (args.numel <= 0) return;
  int64_t blocks;
  if (args.dense) {
    constexpr int64_t tile = static_cast<int64_t>(kMapThreads) * kMapUnroll * vec_width<TOut, TIn...>();
    blocks = (args.numel + tile - 1) / tile;
    cuda::check_grid(name, blocks);
    dense_kernel<F, TOut, TIn...><<<static_cast<unsigned>(blocks), kMapThreads, 0, stream>>>(f, args);
  } else {
    cuda::check_strided_launch(name, args.numel, kMaxStridedElements);
    blocks = (args.numel + kMapThreads - 1) / kMapThreads;
    strided_kernel<F, TOut, TIn...><<<static_cast<unsigned>(blocks), kMapThreads, 0, stream>>>(f, args);
  }
  cuda::check_launch(name);
}

}  // namespace accel::kernels
