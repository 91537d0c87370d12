// Softmax and log-softmax kernels, forward and backward, over the middle dim of [outer, size, inner].
// A softmax over the last dim (inner == 1) gives each row to a group of threads (kernels/row_plan.h):
// rows that fit the group's registers are read once with 16-byte loads; longer ones stream through a
// running (max, sum). Other dims give each thread one column. Math in f32 (f64 for f64) from
// kernels/nn_math.h.
#include <initializer_list>
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/map.cuh"
#include "kernels/nn.h"
#include "kernels/reduce_math.h"
#include "kernels/rows.cuh"

namespace accel::kernels {

namespace softmax_detail {

constexpr int kMaxValues = 32;  // values of one operand a thread caches (forward and backward)

template <class T>
constexpr int vec_of() {
  return static_cast<int>(16 / sizeof(T));
}

template <class C>
__device__ __forceinline__ C finish_sum(C sum, bool is_log) {
  return is_log ? math_log(sum) : C(1) / sum;
}

template <class C>
__device__ __forceinline__ C forward_elem(C x, C row_max, C a, bool is_log) {
  return is_log ? log_softmax_elem(x, row_max, a) : softmax_elem(x, row_max, a);
}

template <class C>
__device__ __forceinline__ C backward_elem(C dy, C y, C acc, bool is_log) {
  return is_log ? log_softmax_backward_elem(dy, y, acc) : softmax_backward_elem(dy, y, acc);
}

// A row held in registers: K vectors of V elements per thread, vector v at lane + k * group.
template <class T, int K>
__global__ void __launch_bounds__(kMaxGroup)
    cached_forward(T* out, const T* in, int64_t rows, int size, int group, bool is_log) {
  using C = compute_t<T>;
  constexpr int V = vec_of<T>();
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int vectors = size / V;
  const auto* src = reinterpret_cast<const Vec<T, V>*>(in + s.row * size);
  auto* dst = reinterpret_cast<Vec<T, V>*>(out + s.row * size);
  C x[K][V];
  C row_max = max_identity<C>();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      const Vec<T, V> raw = src[v];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        x[k][j] = load(raw.v[j]);
        row_max = MaxOp{}(row_max, x[k][j]);
      }
    }
  }
  row_max = group_reduce(row_max, group, MaxOp{}, reduce_scratch<C>());
  C sum = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (s.lane + k * group < vectors) {
#pragma unroll
      for (int j = 0; j < V; ++j) sum += math_exp(x[k][j] - row_max);
    }
  const C a = finish_sum(group_reduce(sum, group, SumOp{}, reduce_scratch<C>()), is_log);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = store<T>(forward_elem(x[k][j], row_max, a, is_log));
      dst[v] = o;
    }
  }
}

template <class T, int K>
__global__ void __launch_bounds__(kMaxGroup)
    cached_backward(T* grad_in, const T* grad_out, const T* out, int64_t rows, int size, int group, bool is_log) {
  using C = compute_t<T>;
  constexpr int V = vec_of<T>();
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int vectors = size / V;
  const auto* dy_src = reinterpret_cast<const Vec<T, V>*>(grad_out + s.row * size);
  const auto* y_src = reinterpret_cast<const Vec<T, V>*>(out + s.row * size);
  auto* dst = reinterpret_cast<Vec<T, V>*>(grad_in + s.row * size);
  C dy[K][V], y[K][V];
  C acc = 0;  // sum(dy * y) for softmax, sum(dy) for log-softmax
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      const Vec<T, V> a = dy_src[v], b = y_src[v];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        dy[k][j] = load(a.v[j]);
        y[k][j] = load(b.v[j]);
        acc += is_log ? dy[k][j] : dy[k][j] * y[k][j];
      }
    }
  }
  acc = group_reduce(acc, group, SumOp{}, reduce_scratch<C>());
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = store<T>(backward_elem(dy[k][j], y[k][j], acc, is_log));
      dst[v] = o;
    }
  }
}

// Rows of any length and alignment: one pass for a running (max, sum), one to write.
template <class T>
__global__ void __launch_bounds__(kMaxGroup)
    streaming_forward(T* out, const T* in, int64_t rows, int64_t size, int group, bool is_log) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const T* x = in + s.row * size;
  T* y = out + s.row * size;
  MaxSum<C> ms{max_identity<C>(), C(0)};
  for (int64_t j = s.lane; j < size; j += group) online_softmax_add(ms.max, ms.sum, static_cast<C>(load(x[j])));
  ms = group_reduce(ms, group, MaxSumOp{}, reduce_scratch<MaxSum<C>>());
  const C a = finish_sum(ms.sum, is_log);
  for (int64_t j = s.lane; j < size; j += group) y[j] = store<T>(forward_elem(static_cast<C>(load(x[j])), ms.max, a, is_log));
}

template <class T>
__global__ void __launch_bounds__(kMaxGroup) streaming_backward(T* grad_in, const T* grad_out, const T* out,
                                                                 int64_t rows, int64_t size, int group, bool is_log) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int64_t base = s.row * size;
  C acc = 0;
  for (int64_t j = s.lane; j < size; j += group) {
    const C dy = load(grad_out[base + j]);
    acc += is_log ? dy : dy * static_cast<C>(load(out[base + j]));
  }
  acc = group_reduce(acc, group, SumOp{}, reduce_scratch<C>());
  for (int64_t j = s.lane; j < size; j += group)
    grad_in[base + j] = store<T>(backward_elem<C>(load(grad_out[base + j]), load(out[base + j]), acc, is_log));
}

// A softmax over an inner dim: thread c owns column (o, i) and walks its size elements, inner apart,
// so neighbouring threads read neighbouring addresses.
template <class T>
__global__ void __launch_bounds__(kRowBlockThreads)
    column_forward(T* out, const T* in, int64_t outer, int64_t size, int64_t inner, bool is_log) {
  using C = compute_t<T>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= outer * inner) return;
  const int64_t base = (c / inner) * size * inner + c % inner;
  C row_max = max_identity<C>(), sum = 0;
  for (int64_t j = 0; j < size; ++j) online_softmax_add(row_max, sum, static_cast<C>(load(in[base + j * inner])));
  const C a = finish_sum(sum, is_log);
  for (int64_t j = 0; j < size; ++j)
    out[base + j * inner] = store<T>(forward_elem(static_cast<C>(load(in[base + j * inner])), row_max, a, is_log));
}

template <class T>
__global__ void __launch_bounds__(kRowBlockThreads) column_backward(T* grad_in, const T* grad_out, const T* out,
                                                                     int64_t outer, int64_t size, int64_t inner,
                                                                     bool is_log) {
  using C = compute_t<T>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= outer * inner) return;
  const int64_t base = (c / inner) * size * inner + c % inner;
  C acc = 0;
  for (int64_t j = 0; j < size; ++j) {
    const C dy = load(grad_out[base + j * inner]);
    acc += is_log ? dy : dy * static_cast<C>(load(out[base + j * inner]));
  }
  for (int64_t j = 0; j < size; ++j) {
    const int64_t at = base + j * inner;
    grad_in[at] = store<T>(backward_elem<C>(load(grad_out[at]), load(out[at]), acc, is_log));
  }
}

// The elements per 16-byte load for a cached row, or 0 where the cached path does not apply (f64,
// or an operand that is not 16-byte aligned).
template <class T>
int cached_vec(std::initializer_list<const void*> operands) {
  if constexpr (std::is_same_v<T, double>) {
    return 0;
  } else {
    for (const void* p : operands)
      if (!aligned16(p)) return 0;
    return vec_of<T>();
  }
}

int64_t column_blocks(const char* name, int64_t outer, int64_t inner) {
  const int64_t blocks = (outer * inner + kRowBlockThreads - 1) / kRowBlockThreads;
  cuda::check_grid(name, blocks);
  return blocks;
}

}  // namespace softmax_detail

void launch_softmax(DType dtype, void* out, const void* in, int64_t outer, int64_t size, int64_t inner, bool is_log,
                    cudaStream_t stream) {
  using namespace softmax_detail;
  if (outer == 0 || size == 0 || inner == 0) return;
  const char* name = is_log ? "log_softmax" : "softmax";
  dispatch_floating(dtype, name, [&]<class T>() {
    T* y = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    if (inner > 1) {
      const auto blocks = static_cast<unsigned>(column_blocks(name, outer, inner));
      column_forward<T><<<blocks, kRowBlockThreads, 0, stream>>>(y, x, outer, size, inner, is_log);
    } else {
      const RowPlan plan = plan_rows(size, cached_vec<T>({out, in}), kMaxValues);
      cuda::check_grid(name, plan.blocks(outer));
      const auto blocks = static_cast<unsigned>(plan.blocks(outer));
      if constexpr (!std::is_same_v<T, double>) {
        if (plan.cached) {
          with_k<kMaxValues / vec_of<T>()>(plan.k, [&]<int K>() {
            cached_forward<T, K><<<blocks, plan.threads, 0, stream>>>(y, x, outer, static_cast<int>(size), plan.group,
                                                                      is_log);
          });
          cuda::check_launch(name);
          return;
        }
      }
      streaming_forward<T><<<blocks, plan.threads, 0, stream>>>(y, x, outer, size, plan.group, is_log);
    }
    cuda::check_launch(name);
  });
}

void launch_softmax_backward(DType dtype, void* grad_in, const void* grad_out, const void* out, int64_t outer,
                             int64_t size, int64_t inner, bool is_log, cudaStream_t stream) {
  using namespace softmax_detail;
  if (outer == 0 || size == 0 || inner == 0) return;
  const char* name = is_log ? "log_softmax_backward" : "softmax_backward";
  dispatch_floating(dtype, name, [&]<class T>() {
    T* dx = static_cast<T*>(grad_in);
    const T* dy = static_cast<const T*>(grad_out);
    const T* y = static_cast<const T*>(out);
    if (inner > 1) {
      const auto blocks = static_cast<unsigned>(column_blocks(name, outer, inner));
      column_backward<T><<<blocks, kRowBlockThreads, 0, stream>>>(dx, dy, y, outer, size, inner, is_log);
    } else {
      const RowPlan plan = plan_rows(size, cached_vec<T>({grad_in, grad_out, out}), kMaxValues);
      cuda::check_grid(name, plan.blocks(outer));
      const auto blocks = static_cast<unsigned>(plan.blocks(outer));
      if constexpr (!std::is_same_v<T, double>) {
        if (plan.cached) {
          with_k<kMaxValues / vec_of<T>()>(plan.k, [&]<int K>() {
            cached_backward<T, K><<<blocks, plan.threads, 0, stream>>>(dx, dy, y, outer, static_cast<int>(size),
                                                                       plan.group, is_log);
          });
          cuda::check_launch(name);
          return;
        }
      }
      streaming_backward<T><<<blocks, plan.threads, 0, stream>>>(dx, dy, y, outer, size, plan.group, is_log);
    }
    cuda::check_launch(name);
  });
}

}  // namespace accel::kernels
