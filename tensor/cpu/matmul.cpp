// CPU matmul: every [M, K] x [K, N] product is one GEMM (gemm_product: OpenBLAS or Eigen) over maps of
// the operands' own buffers; the GEMM threads a large product with OpenMP, and many small products are
// spread over threads instead.
// linear is the same GEMM accumulating into an output that starts as the broadcast bias. In
// deterministic mode both compute fixed output tiles instead, one single-threaded GEMM each.
#include "tensor/cpu/matmul.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/gemm_product.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/deterministic.h"
#include "tensor/op_time.h"

namespace accel::cpu {

MatrixLayout gemm_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  // A dim of size <= 1 is never stepped along, so its stride does not matter. The outer stride must
  // keep rows (columns) apart: Eigen reads it as the leading dimension of a BLAS matrix.
  const bool unit_cols = cols <= 1 || col_stride == 1;
  const bool rows_apart = rows <= 1 || row_stride >= cols;
  if (unit_cols && rows_apart) return {GemmLayout::row_major, rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride};
  const bool unit_rows = rows <= 1 || row_stride == 1;
  const bool cols_apart = cols <= 1 || col_stride >= rows;
  if (unit_rows && cols_apart) return {GemmLayout::col_major, cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return {GemmLayout::copy, 0};
}

MatrixLayout gemm_layout(const Tensor& t) {
  return gemm_layout(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1));
}

namespace {

template <class C, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;
template <class C>
using OutMap = Eigen::Map<Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// One strided matrix of an operand: its first element, sizes, element strides and Eigen layout.
template <class T>
struct Matrix {
  const T* data;
  int64_t rows, cols, row_stride, col_stride;
  MatrixLayout layout;
};

// Per-thread buffers for operands that are widened (f16/bf16) or copied, and for an f32 result
// that is rounded into half storage. Sized before any parallel region, so nothing allocates inside.
template <class C>
struct Workspace {
  std::vector<C> a, b, out;
};

// Calls f with an Eigen map of m's values in the compute type C: the buffer itself when its type and
// layout allow, else a copy into buf packed in the order m is laid out in, so the copy reads memory in
// sequence.
template <class C, class T, class F>
void with_map(const Matrix<T>& m, std::vector<C>& buf, F&& f) {
  const auto rows = static_cast<Eigen::Index>(m.rows), cols = static_cast<Eigen::Index>(m.cols);
  if constexpr (std::is_same_v<T, C>) {
    const Eigen::OuterStride<> outer(m.layout.outer_stride);
    if (m.layout.layout == GemmLayout::row_major) return f(ConstMap<C, Eigen::RowMajor>(m.data, rows, cols, outer));
    if (m.layout.layout == GemmLayout::col_major) return f(ConstMap<C, Eigen::ColMajor>(m.data, rows, cols, outer));
  }
  C* dst = buf.data();
  if (m.layout.layout == GemmLayout::col_major) {
    for (int64_t j = 0; j < m.cols; ++j)
      for (int64_t i = 0; i < m.rows; ++i) dst[j * m.rows + i] = load(m.data[i * m.row_stride + j * m.col_stride]);
    return f(ConstMap<C, Eigen::ColMajor>(dst, rows, cols, Eigen::OuterStride<>(std::max<Eigen::Index>(rows, 1))));
  }
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) dst[i * m.cols + j] = load(m.data[i * m.row_stride + j * m.col_stride]);
  f(ConstMap<C, Eigen::RowMajor>(dst, rows, cols, Eigen::OuterStride<>(std::max<Eigen::Index>(cols, 1))));
}

// out (contiguous [M, N]) = a @ b.
template <class T, class C = compute_t<T>>
void gemm(T* out, const Matrix<T>& a, const Matrix<T>& b, Workspace<C>& ws) {
  const auto cols = static_cast<Eigen::Index>(b.cols);
  with_map<C>(a, ws.a, [&](const auto& ma) {
    with_map<C>(b, ws.b, [&](const auto& mb) {
      if constexpr (std::is_same_v<T, C>) {
        gemm_product<C>(out, cols, ma, mb, false);
      } else {
        gemm_product<C>(ws.out.data(), cols, ma, mb, false);
        for (int64_t i = 0; i < a.rows * b.cols; ++i) out[i] = store<T>(ws.out[i]);
      }
    });
  });
}

// Multiply-adds a thread needs before waking it pays off; Eigen's parallelize_gemm uses the same
// figure, so a product smaller than two of these runs on one thread inside Eigen.
constexpr double kMinThreadWork = 50000.0;

// ---- Deterministic mode ----
// Eigen picks its inner-dim blocking from the number of threads it may use, so a threaded GEMM groups
// the terms of each dot product differently on 1 and on 4 threads (3e-5 apart in f32 at
// [8, 2048] x [2048, 8]). In deterministic mode every output is cut into tiles that depend on the
// shapes alone, and each tile is one Eigen GEMM on one thread over the whole inner dim: which thread
// computes a tile, and how many threads there are, changes nothing in its result.
//
// Tiles are square. 256 x 256 cost 0-4 % on one thread against one whole-matrix GEMM, 128 x 128
// 10-13 % (the operands are repacked per tile), so the edge is the largest of 256, 128 and 64 that
// still gives kSpreadTiles tiles in all: large products run at Eigen's speed, mid-size ones still
// spread over up to kSpreadTiles threads. A product with fewer tiles than threads leaves the others idle.
constexpr int64_t kSpreadTiles = 16;

// The fixed tiles of `products` [m, n] outputs with inner dim k; a function of the shapes alone.
struct TileGrid {
  int64_t products, m, n, k;
  int64_t edge = 0, row_tiles = 0, col_tiles = 0;
  int64_t count() const { return products * row_tiles * col_tiles; }
};

TileGrid tile_grid(int64_t products, int64_t m, int64_t n, int64_t k) {
  TileGrid g{products, m, n, k};
  for (const int64_t edge : {256, 128, 64}) {
    g.edge = edge;
    g.row_tiles = (m + edge - 1) / edge;
    g.col_tiles = (n + edge - 1) / edge;
    if (g.count() >= kSpreadTiles) break;
  }
  return g;
}

template <class C>
using OutBlock = Eigen::Map<Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;

// The [rows, cols] block of m at (r0, c0): the same strides, so the same layout still reads it.
template <class T>
Matrix<T> block_of(const Matrix<T>& m, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  return {m.data + r0 * m.row_stride + c0 * m.col_stride, rows, cols, m.row_stride, m.col_stride, m.layout};
}

// The inner dim in fixed panels: Eigen sums a panel no longer than its own L1-sized block in one
// sequence (that block is 253 or more with a 32 KiB L1 data cache: f64 with AVX2 is the smallest
// case, f32 and AVX-512 allow more), so these panels, not the machine's cache sizes, decide how each
// dot product is grouped.
constexpr int64_t kInnerPanel = 128;

// o = a @ b (or += with Accumulate), one inner panel at a time.
template <bool Accumulate, class Out, class A, class B>
void panel_product(Out&& o, const A& a, const B& b) {
  const Eigen::Index k = a.cols();
  if (k == 0 && !Accumulate) o.setZero();
  for (Eigen::Index k0 = 0; k0 < k; k0 += kInnerPanel) {
    const Eigen::Index kp = std::min<Eigen::Index>(kInnerPanel, k - k0);
    if (Accumulate || k0 > 0) o.noalias() += a.middleCols(k0, kp) * b.middleRows(k0, kp);
    else o.noalias() = a.middleCols(k0, kp) * b.middleRows(k0, kp);
  }
}

// out, a row-major block with leading dim ld, = a @ b (or += with Accumulate, which needs out in the
// compute type). Called with Eigen limited to this thread.
template <bool Accumulate, class TOut, class T, class C>
void gemm_block(TOut* out, int64_t ld, const Matrix<T>& a, const Matrix<T>& b, Workspace<C>& ws) {
  static_assert(!Accumulate || std::is_same_v<TOut, C>, "accumulating needs an output in the compute type");
  const auto rows = static_cast<Eigen::Index>(a.rows), cols = static_cast<Eigen::Index>(b.cols);
  with_map<C>(a, ws.a, [&](const auto& ma) {
    with_map<C>(b, ws.b, [&](const auto& mb) {
      if constexpr (std::is_same_v<TOut, C>) {
        panel_product<Accumulate>(OutBlock<C>(out, rows, cols, Eigen::OuterStride<>(ld)), ma, mb);
      } else {
        panel_product<false>(OutMap<C>(ws.out.data(), rows, cols), ma, mb);
        for (int64_t i = 0; i < a.rows; ++i)
          for (int64_t j = 0; j < b.cols; ++j) out[i * ld + j] = store<TOut>(ws.out[i * b.cols + j]);
      }
    });
  });
}

// One thread's buffers for a tile of g (see Workspace).
template <class C>
void size_for_tiles(Workspace<C>& ws, const TileGrid& g, bool widen_a, bool widen_b, bool widen_out) {
  const int64_t tr = std::min(g.m, g.edge), tc = std::min(g.n, g.edge);
  if (widen_a) ws.a.resize(static_cast<size_t>(tr * g.k));
  if (widen_b) ws.b.resize(static_cast<size_t>(g.k * tc));
  if (widen_out) ws.out.resize(static_cast<size_t>(tr * tc));
}

// How many threads g's tiles are spread over: no more than there are tiles, nor than the work pays for.
int tile_teams(const TileGrid& g) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work = static_cast<double>(g.products) * static_cast<double>(g.m) * static_cast<double>(g.n) *
                      static_cast<double>(g.k);
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({threads, g.count(), static_cast<int64_t>(work / kMinThreadWork)})));
}

// Calls tile(product, r0, rows, c0, cols, thread) for every tile of g, on `teams` threads.
template <class F>
void for_each_tile(const TileGrid& g, int teams, F&& tile) {
  const int64_t per_product = g.row_tiles * g.col_tiles, tasks = g.count();
#pragma omp parallel num_threads(teams)
  {
    // Eigen threads a GEMM itself whenever it sees more than one thread to use, with a blocking that
    // depends on how many. This limits what this thread's task (and any region nested in it) sees;
    // the caller's own setting belongs to the task outside this region and is untouched.
    omp_set_num_threads(1);
    const int thread = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < tasks; ++i) {
      const int64_t p = i / per_product, r0 = (i % per_product) / g.col_tiles * g.edge,
                    c0 = i % g.col_tiles * g.edge;
      tile(p, r0, std::min(g.edge, g.m - r0), c0, std::min(g.edge, g.n - c0), thread);
    }
  }
}

// The element offset of batch entry `index` (row-major over batch) in a tensor with those strides.
int64_t batch_offset(int64_t index, const Shape& batch, const Strides& strides) {
  int64_t offset = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    offset += (index % batch[d]) * strides[d];
    index /= batch[d];
  }
  return offset;
}

// When b is the same matrix for every batch entry (a weight broadcast over a batch of inputs) and
// a's batch and row dims merge into one strided dim, the whole batch is one [B*M, K] x [K, N] GEMM:
// one large product that Eigen threads well instead of B small ones. Returns the row stride of
// the merged dim, or 0 when a cannot be folded.
int64_t foldable_row_stride(const Tensor& a, const Tensor& b, const Shape& batch) {
  for (size_t d = 0; d < batch.size(); ++d)
    if (batch[d] > 1 && b.strides()[d] != 0) return 0;
  int64_t stride = 0, span = 0;  // stride and extent of the merged dims seen so far, innermost first
  for (int64_t d = a.dim() - 2; d >= 0; --d) {
    const int64_t size = a.shape()[d];
    if (size == 1) continue;
    if (span == 0) {
      stride = a.strides()[d];
    } else if (a.strides()[d] != stride * span) {
      return 0;
    }
    span = span == 0 ? size : span * size;
  }
  return stride;
}

// How matmul reads its operands: `products` products of [rows, k] x [k, n], entry i of a starting at
// batch_offset(i, batch, a's strides) with rows a_row_stride apart (rows spans the batch when folded).
struct ProductPlan {
  Shape batch;
  int64_t products, rows, n, k, a_row_stride;
  MatrixLayout layout_a, layout_b;
};

// matmul in deterministic mode: every product's output in fixed tiles (see for_each_tile).
void matmul_tiles(const Tensor& out, const Tensor& a, const Tensor& b, const ProductPlan& p) {
  const TileGrid grid = tile_grid(p.products, p.rows, p.n, p.k);
  const int teams = tile_teams(grid);
  dispatch_floating(out.dtype(), "matmul", [&]<class T>() {
    using C = compute_t<T>;
    const bool widen = !std::is_same_v<T, C>;
    std::vector<Workspace<C>> spaces(static_cast<size_t>(teams));
    for (Workspace<C>& ws : spaces)
      size_for_tiles(ws, grid, widen || p.layout_a.layout == GemmLayout::copy,
                     widen || p.layout_b.layout == GemmLayout::copy, widen);
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    for_each_tile(grid, teams, [&](int64_t i, int64_t r0, int64_t tr, int64_t c0, int64_t tc, int thread) {
      const Matrix<T> ma{pa + batch_offset(i, p.batch, a.strides()), p.rows, p.k, p.a_row_stride, a.stride(-1),
                         p.layout_a};
      const Matrix<T> mb{pb + batch_offset(i, p.batch, b.strides()), p.k, p.n, b.stride(-2), b.stride(-1), p.layout_b};
      gemm_block<false>(po + i * p.rows * p.n + r0 * p.n + c0, p.n, block_of(ma, r0, tr, 0, p.k),
                        block_of(mb, 0, p.k, c0, tc), spaces[static_cast<size_t>(thread)]);
    });
  });
}

// linear's GEMM in deterministic mode: acc (contiguous [x.rows, w.cols], holding the bias rows) +=
// x @ w in fixed tiles.
template <class T, class C>
void linear_tiles(C* acc, const Matrix<T>& x, const Matrix<T>& w, bool widen_x, bool widen_w) {
  const TileGrid grid = tile_grid(1, x.rows, w.cols, x.cols);
  const int teams = tile_teams(grid);
  std::vector<Workspace<C>> spaces(static_cast<size_t>(teams));
  for (Workspace<C>& ws : spaces) size_for_tiles(ws, grid, widen_x, widen_w, false);
  for_each_tile(grid, teams, [&](int64_t, int64_t r0, int64_t tr, int64_t c0, int64_t tc, int thread) {
    gemm_block<true>(acc + r0 * w.cols + c0, w.cols, block_of(x, r0, tr, 0, x.cols), block_of(w, 0, x.cols, c0, tc),
                     spaces[static_cast<size_t>(thread)]);
  });
}

}  // namespace

std::string gemm_library() {
#if ACCEL_WITH_BLAS
  return std::string("OpenBLAS (") + openblas_get_config() + ")";
#else
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
#endif
}

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  const op_time::Scope timed(op_time::Kind::matmul);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t batch_count = shape_numel(batch);
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  if (out.numel() == 0) return;

  int64_t products = batch_count, rows = m, a_row_stride = a.stride(-2);
  if (batch_count > 1) {
    if (const int64_t folded = foldable_row_stride(a, b, batch); folded > 0) {
      products = 1;
      rows = batch_count * m;
      a_row_stride = folded;
    }
  }
  const MatrixLayout layout_a = gemm_layout(rows, k, a_row_stride, a.stride(-1));
  const MatrixLayout layout_b = gemm_layout(b);
  if (deterministic_mode())
    return matmul_tiles(out, a, b, {batch, products, rows, n, k, a_row_stride, layout_a, layout_b});

  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work = static_cast<double>(rows) * static_cast<double>(n) * static_cast<double>(k);
  // Whole products per thread keep every core busy when there are many of them, or when each is
  // too small for Eigen to thread; inside the parallel region Eigen runs single-threaded. Tiny
  // batches stay on one thread: waking the team would cost more than the products.
  const int64_t useful = std::min<int64_t>(
      {threads, products, static_cast<int64_t>(static_cast<double>(products) * work / kMinThreadWork)});
  const bool over_batch = useful > 1 && (products >= 4 * threads || work < 2 * kMinThreadWork);
  const int teams = over_batch ? static_cast<int>(useful) : 1;

  dispatch_floating(out.dtype(), "matmul", [&]<class T>() {
    using C = compute_t<T>;
    const bool widen = !std::is_same_v<T, C>;
    std::vector<Workspace<C>> spaces(static_cast<size_t>(teams));
    for (Workspace<C>& ws : spaces) {
      if (widen || layout_a.layout == GemmLayout::copy) ws.a.resize(static_cast<size_t>(rows * k));
      if (widen || layout_b.layout == GemmLayout::copy) ws.b.resize(static_cast<size_t>(k * n));
      if (widen) ws.out.resize(static_cast<size_t>(rows * n));
    }
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    auto product = [&](int64_t i, Workspace<C>& ws) {
      const Matrix<T> ma{pa + batch_offset(i, batch, a.strides()), rows, k, a_row_stride, a.stride(-1), layout_a};
      const Matrix<T> mb{pb + batch_offset(i, batch, b.strides()), k, n, b.stride(-2), b.stride(-1), layout_b};
      gemm<T>(po + i * rows * n, ma, mb, ws);
    };
    if (teams > 1) {
#pragma omp parallel num_threads(teams)
      {
        Workspace<C>& ws = spaces[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
        for (int64_t i = 0; i < products; ++i) product(i, ws);
      }
    } else {
      for (int64_t i = 0; i < products; ++i) product(i, spaces[0]);
    }
  });
}

void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const op_time::Scope timed(op_time::Kind::matmul);
  const int64_t rows = x.size(0), k = x.size(1), n = weight.size(0);
  if (out.numel() == 0) return;
  const MatrixLayout layout_x = gemm_layout(x);
  // weight^T, [k, n], read in place: a row-major [n, k] weight is a column-major [k, n] matrix.
  const MatrixLayout layout_w = gemm_layout(k, n, weight.stride(1), weight.stride(0));

  dispatch_floating(out.dtype(), "linear", [&]<class T>() {
    using C = compute_t<T>;
    constexpr bool widen = !std::is_same_v<T, C>;
    const bool tiles = k > 0 && deterministic_mode();  // else one Eigen GEMM, which reads whole operands
    Workspace<C> ws;
    if (!tiles && (widen || layout_x.layout == GemmLayout::copy)) ws.a.resize(static_cast<size_t>(rows * k));
    if (!tiles && (widen || layout_w.layout == GemmLayout::copy)) ws.b.resize(static_cast<size_t>(k * n));
    if (widen) ws.out.resize(static_cast<size_t>(rows * n));
    C* acc = nullptr;
    if constexpr (widen) acc = ws.out.data();
    else acc = static_cast<C*>(out.data_ptr());

    // The accumulator starts as the bias in every row (or zeros).
    std::vector<C> row(static_cast<size_t>(n), C(0));
    if (bias.defined()) {
      const T* pb = static_cast<const T*>(bias.data_ptr());
      for (int64_t j = 0; j < n; ++j) row[j] = load(pb[j * bias.stride(0)]);
    }
#pragma omp parallel for if (rows * n > kParallelGrain)
    for (int64_t i = 0; i < rows; ++i) std::copy(row.begin(), row.end(), acc + i * n);

    const Matrix<T> mx{static_cast<const T*>(x.data_ptr()), rows, k, x.stride(0), x.stride(1), layout_x};
    const Matrix<T> mw{static_cast<const T*>(weight.data_ptr()), k, n, weight.stride(1), weight.stride(0), layout_w};
    if (tiles) {
      linear_tiles(acc, mx, mw, widen || layout_x.layout == GemmLayout::copy,
                   widen || layout_w.layout == GemmLayout::copy);
    } else if (k > 0) {
      with_map<C>(mx, ws.a, [&](const auto& a) {
        with_map<C>(mw, ws.b, [&](const auto& b) {
          gemm_product<C>(acc, static_cast<Eigen::Index>(n), a, b, true);
        });
      });
    }
    if constexpr (widen) {
      T* po = static_cast<T*>(out.data_ptr());
#pragma omp parallel for if (rows * n > kParallelGrain)
      for (int64_t i = 0; i < rows * n; ++i) po[i] = store<T>(acc[i]);
    }
  });
}

}  // namespace accel::cpu
