// Layer norm kernels over the last dim of [rows, dim]. Forward and the input grad give each row to a
// group of threads (kernels/row_plan.h); rows that fit the group's registers are read once, with
// the row statistics of kernels/nn_math.h taken in two passes over the registers as the CPU takes
// them over memory: the sum of x - shift (shift = the row's first element), then those of d and d^2.
// The weight and bias grads are column sums over rows: fixed chunks of rows produce partial sums,
// which a second kernel adds in chunk order, so the grads are deterministic and need no atomics.
#include <initializer_list>
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/map.cuh"
#include "kernels/nn.h"
#include "kernels/rows.cuh"

namespace accel::kernels {

namespace layer_norm_detail {

constexpr int kForwardValues = 32;   // x values a thread caches in the forward
constexpr int kBackwardValues = 16;  // values of each of x and grad_out a thread caches in the backward
constexpr int64_t kMaxParamChunks = 1024;
constexpr int kColumnThreads = 256;

template <class T>
constexpr int vec_of() {
  return static_cast<int>(16 / sizeof(T));
}

template <class T, class C>
__device__ __forceinline__ C load_or(const T* p, int64_t i, C fallback) {
  return p != nullptr ? static_cast<C>(load(p[i])) : fallback;
}

template <class T, int K>
__global__ void __launch_bounds__(kMaxGroup)
    cached_forward(T* out, compute_t<T>* mean, compute_t<T>* rstd, const T* in, const T* weight, const T* bias,
                   int64_t rows, int dim, compute_t<T> eps, int group) {
  using C = compute_t<T>;
  constexpr int V = vec_of<T>();
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int vectors = dim / V;
  const auto* src = reinterpret_cast<const Vec<T, V>*>(in + s.row * dim);
  auto* dst = reinterpret_cast<Vec<T, V>*>(out + s.row * dim);
  const C inv_dim = C(1) / static_cast<C>(dim);
  const C shift = static_cast<C>(load(in[s.row * dim]));
  C x[K][V];
  C sum = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      const Vec<T, V> raw = src[v];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        x[k][j] = load(raw.v[j]);
        sum += x[k][j] - shift;
      }
    }
  }
  const C mu = layer_norm_mean(shift, group_reduce(sum, group, SumOp{}, reduce_scratch<C>()), inv_dim);
  C dev = 0, sq = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (s.lane + k * group < vectors) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const C d = x[k][j] - mu;
        dev += d;
        sq += d * d;
      }
    }
  dev = group_reduce(dev, group, SumOp{}, reduce_scratch<C>());
  sq = group_reduce(sq, group, SumOp{}, reduce_scratch<C>());
  const LayerNormRow<C> row = layer_norm_row(mu, dev, sq, inv_dim, eps);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t col = static_cast<int64_t>(v) * V + j;
        o.v[j] = store<T>(layer_norm_elem(x[k][j], row, load_or(weight, col, C(1)), load_or(bias, col, C(0))));
      }
      dst[v] = o;
    }
  }
  if (s.lane == 0) {
    mean[s.row] = layer_norm_row_mean(row);
    rstd[s.row] = row.rstd;
  }
}

template <class T>
__global__ void __launch_bounds__(kMaxGroup)
    streaming_forward(T* out, compute_t<T>* mean, compute_t<T>* rstd, const T* in, const T* weight, const T* bias,
                      int64_t rows, int64_t dim, compute_t<T> eps, int group) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const T* x = in + s.row * dim;
  T* y = out + s.row * dim;
  const C inv_dim = C(1) / static_cast<C>(dim);
  const C shift = static_cast<C>(load(x[0]));
  C sum = 0;
  for (int64_t j = s.lane; j < dim; j += group) sum += static_cast<C>(load(x[j])) - shift;
  const C mu = layer_norm_mean(shift, group_reduce(sum, group, SumOp{}, reduce_scratch<C>()), inv_dim);
  C dev = 0, sq = 0;
  for (int64_t j = s.lane; j < dim; j += group) {
    const C d = static_cast<C>(load(x[j])) - mu;
    dev += d;
    sq += d * d;
  }
  dev = group_reduce(dev, group, SumOp{}, reduce_scratch<C>());
  sq = group_reduce(sq, group, SumOp{}, reduce_scratch<C>());
  const LayerNormRow<C> row = layer_norm_row(mu, dev, sq, inv_dim, eps);
  for (int64_t j = s.lane; j < dim; j += group)
    y[j] = store<T>(layer_norm_elem<C>(load(x[j]), row, load_or(weight, j, C(1)), load_or(bias, j, C(0))));
  if (s.lane == 0) {
    mean[s.row] = layer_norm_row_mean(row);
    rstd[s.row] = row.rstd;
  }
}

// dx: with xhat = (x - mean) * rstd and dxhat = dy * w, the row sums of dxhat and dxhat * xhat.
template <class T, int K>
__global__ void __launch_bounds__(kMaxGroup)
    cached_backward_input(T* grad_input, const T* grad_out, const T* in, const compute_t<T>* mean,
                          const compute_t<T>* rstd, const T* weight, int64_t rows, int dim, int group) {
  using C = compute_t<T>;
  constexpr int V = vec_of<T>();
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int vectors = dim / V;
  const auto* dy_src = reinterpret_cast<const Vec<T, V>*>(grad_out + s.row * dim);
  const auto* x_src = reinterpret_cast<const Vec<T, V>*>(in + s.row * dim);
  auto* dst = reinterpret_cast<Vec<T, V>*>(grad_input + s.row * dim);
  const C mu = mean[s.row], rs = rstd[s.row], inv_dim = C(1) / static_cast<C>(dim);
  C dxhat[K][V], xhat[K][V];
  C sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      const Vec<T, V> g = dy_src[v], x = x_src[v];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const C gj = load(g.v[j]);
        xhat[k][j] = (static_cast<C>(load(x.v[j])) - mu) * rs;
        dxhat[k][j] = weight != nullptr ? gj * static_cast<C>(load(weight[static_cast<int64_t>(v) * V + j])) : gj;
        sum_dxhat += dxhat[k][j];
        sum_dxhat_xhat += dxhat[k][j] * xhat[k][j];
      }
    }
  }
  const C mean_dxhat = group_reduce(sum_dxhat, group, SumOp{}, reduce_scratch<C>()) * inv_dim;
  const C mean_dxhat_xhat = group_reduce(sum_dxhat_xhat, group, SumOp{}, reduce_scratch<C>()) * inv_dim;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int v = s.lane + k * group;
    if (v < vectors) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j)
        o.v[j] = store<T>(layer_norm_backward_elem(dxhat[k][j], xhat[k][j], rs, mean_dxhat, mean_dxhat_xhat));
      dst[v] = o;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kMaxGroup)
    streaming_backward_input(T* grad_input, const T* grad_out, const T* in, const compute_t<T>* mean,
                             const compute_t<T>* rstd, const T* weight, int64_t rows, int64_t dim, int group) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int64_t base = s.row * dim;
  const C mu = mean[s.row], rs = rstd[s.row], inv_dim = C(1) / static_cast<C>(dim);
  C sum_dxhat = 0, sum_dxhat_xhat = 0;
  for (int64_t j = s.lane; j < dim; j += group) {
    const C xhat = (static_cast<C>(load(in[base + j])) - mu) * rs;
    const C dxhat = static_cast<C>(load(grad_out[base + j])) * load_or(weight, j, C(1));
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
  }
  const C mean_dxhat = group_reduce(sum_dxhat, group, SumOp{}, reduce_scratch<C>()) * inv_dim;
  const C mean_dxhat_xhat = group_reduce(sum_dxhat_xhat, group, SumOp{}, reduce_scratch<C>()) * inv_dim;
  for (int64_t j = s.lane; j < dim; j += group) {
    const C xhat = (static_cast<C>(load(in[base + j])) - mu) * rs;
    const C dxhat = static_cast<C>(load(grad_out[base + j])) * load_or(weight, j, C(1));
    grad_input[base + j] = store<T>(layer_norm_backward_elem(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat));
  }
}

// Chunk blockIdx.y of rows_per_chunk rows: thread j sums column j's dy * xhat and dy over the chunk.
template <class T>
__global__ void __launch_bounds__(kColumnThreads)
    param_partials(compute_t<T>* part_w, compute_t<T>* part_b, const T* grad_out, const T* in,
                   const compute_t<T>* mean, const compute_t<T>* rstd, int64_t rows, int64_t dim,
                   int64_t rows_per_chunk) {
  using C = compute_t<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (j >= dim) return;
  const int64_t chunk = blockIdx.y, first = chunk * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  C acc_w = 0, acc_b = 0;
  for (int64_t r = first; r < last; ++r) {
    const C g = load(grad_out[r * dim + j]);
    if (part_w != nullptr) acc_w += g * ((static_cast<C>(load(in[r * dim + j])) - mean[r]) * rstd[r]);
    acc_b += g;
  }
  if (part_w != nullptr) part_w[chunk * dim + j] = acc_w;
  if (part_b != nullptr) part_b[chunk * dim + j] = acc_b;
}

template <class T>
__global__ void __launch_bounds__(kColumnThreads)
    param_finish(T* grad_weight, T* grad_bias, const compute_t<T>* part_w, const compute_t<T>* part_b,
                 int64_t chunks, int64_t dim) {
  using C = compute_t<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (j >= dim) return;
  if (grad_weight != nullptr) {
    C acc = 0;
    for (int64_t c = 0; c < chunks; ++c) acc += part_w[c * dim + j];
    grad_weight[j] = store<T>(acc);
  }
  if (grad_bias != nullptr) {
    C acc = 0;
    for (int64_t c = 0; c < chunks; ++c) acc += part_b[c * dim + j];
    grad_bias[j] = store<T>(acc);
  }
}

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

int64_t rows_per_chunk(int64_t rows) { return (rows + kMaxParamChunks - 1) / kMaxParamChunks; }

}  // namespace layer_norm_detail

int64_t layer_norm_param_chunks(int64_t rows) {
  if (rows == 0) return 0;
  const int64_t per = layer_norm_detail::rows_per_chunk(rows);
  return (rows + per - 1) / per;
}

void launch_layer_norm(DType dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                       const void* bias, int64_t rows, int64_t dim, double eps, cudaStream_t stream) {
  using namespace layer_norm_detail;
  if (rows == 0) return;
  dispatch_floating(dtype, "layer_norm", [&]<class T>() {
    using C = compute_t<T>;
    T* y = static_cast<T*>(out);
    C* mu = static_cast<C*>(mean);
    C* rs = static_cast<C*>(rstd);
    const T* in = static_cast<const T*>(x);
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    const RowPlan plan = plan_rows(dim, cached_vec<T>({out, x}), kForwardValues);
    cuda::check_grid("layer_norm", plan.blocks(rows));
    const auto blocks = static_cast<unsigned>(plan.blocks(rows));
    if constexpr (!std::is_same_v<T, double>) {
      if (plan.cached) {
        with_k<kForwardValues / vec_of<T>()>(plan.k, [&]<int K>() {
          cached_forward<T, K><<<blocks, plan.threads, 0, stream>>>(y, mu, rs, in, w, b, rows, static_cast<int>(dim),
                                                                    static_cast<C>(eps), plan.group);
        });
        cuda::check_launch("layer_norm");
        return;
      }
    }
    streaming_forward<T><<<blocks, plan.threads, 0, stream>>>(y, mu, rs, in, w, b, rows, dim, static_cast<C>(eps),
                                                              plan.group);
    cuda::check_launch("layer_norm");
  });
}

void launch_layer_norm_backward_input(DType dtype, void* grad_input, const void* grad_out, const void* x,
                                      const void* mean, const void* rstd, const void* weight, int64_t rows,
                                      int64_t dim, cudaStream_t stream) {
  using namespace layer_norm_detail;
  if (rows == 0) return;
  dispatch_floating(dtype, "layer_norm_backward", [&]<class T>() {
    using C = compute_t<T>;
    T* dx = static_cast<T*>(grad_input);
    const T* dy = static_cast<const T*>(grad_out);
    const T* in = static_cast<const T*>(x);
    const C* mu = static_cast<const C*>(mean);
    const C* rs = static_cast<const C*>(rstd);
    const T* w = static_cast<const T*>(weight);
    const RowPlan plan = plan_rows(dim, cached_vec<T>({grad_input, grad_out, x}), kBackwardValues);
    cuda::check_grid("layer_norm_backward", plan.blocks(rows));
    const auto blocks = static_cast<unsigned>(plan.blocks(rows));
    if constexpr (!std::is_same_v<T, double>) {
      if (plan.cached) {
        with_k<kBackwardValues / vec_of<T>()>(plan.k, [&]<int K>() {
          cached_backward_input<T, K><<<blocks, plan.threads, 0, stream>>>(dx, dy, in, mu, rs, w, rows,
                                                                           static_cast<int>(dim), plan.group);
        });
        cuda::check_launch("layer_norm_backward");
        return;
      }
    }
    streaming_backward_input<T><<<blocks, plan.threads, 0, stream>>>(dx, dy, in, mu, rs, w, rows, dim, plan.group);
    cuda::check_launch("layer_norm_backward");
  });
}

void launch_layer_norm_backward_params(DType dtype, void* grad_weight, void* grad_bias, const void* grad_out,
                                       const void* x, const void* mean, const void* rstd, int64_t rows, int64_t dim,
                                       void* workspace, cudaStream_t stream) {
  using namespace layer_norm_detail;
  if (dim == 0 || (grad_weight == nullptr && grad_bias == nullptr)) return;
  dispatch_floating(dtype, "layer_norm_backward", [&]<class T>() {
    using C = compute_t<T>;
    const int64_t chunks = layer_norm_param_chunks(rows);
    C* part_w = grad_weight != nullptr ? static_cast<C*>(workspace) : nullptr;
    C* part_b = grad_bias != nullptr ? static_cast<C*>(workspace) + chunks * dim : nullptr;
    const int64_t column_blocks = (dim + kColumnThreads - 1) / kColumnThreads;
    cuda::check_grid("layer_norm_backward", column_blocks);
    if (chunks > 0) {
      const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
      param_partials<T><<<grid, kColumnThreads, 0, stream>>>(part_w, part_b, static_cast<const T*>(grad_out),
                                                             static_cast<const T*>(x), static_cast<const C*>(mean),
                                                             static_cast<const C*>(rstd), rows, dim,
                                                             rows_per_chunk(rows));
      cuda::check_launch("layer_norm_backward");
    }
    param_finish<T><<<static_cast<unsigned>(column_blocks), kColumnThreads, 0, stream>>>(
        static_cast<T*>(grad_weight), static_cast<T*>(grad_bias), part_w, part_b, chunks, dim);
    cuda::check_launch("layer_norm_backward");
  });
}

}  // namespace accel::kernels
