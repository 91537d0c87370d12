// CPU row reductions: floating sums accumulate in f64, so long sums of f32/f16 stay accurate.
#include "tensor/cpu/reduce.h"

#include <algorithm>
#include <limits>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/map.h"
#include "tensor/op_time.h"

namespace accel::cpu {

namespace {

// The largest (IsMax) or smallest element of a row; a NaN wins, as in numpy.
template <bool IsMax, class T>
compute_t<T> row_extreme(const T* row, int64_t inner) {
  compute_t<T> best = inner > 0 ? load(row[0]) : compute_t<T>(0);
  for (int64_t j = 1; j < inner; ++j) {
    const compute_t<T> v = load(row[j]);
    if ((IsMax ? v > best : v < best) || is_nan(v)) best = v;
    if (is_nan(best)) break;
  }
  return best;
}

// Where row_extreme is first found.
template <bool IsMax, class T>
int64_t row_extreme_at(const T* row, int64_t inner) {
  int64_t best_at = 0;
  compute_t<T> best = load(row[0]);
  for (int64_t j = 1; j < inner && !is_nan(best); ++j) {
    const compute_t<T> v = load(row[j]);
    if ((IsMax ? v > best : v < best) || is_nan(v)) {
      best = v;
      best_at = j;
    }
  }
  return best_at;
}

template <bool IsMax>
void arg_extreme_rows(const char* op, const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  dispatch_all(in.dtype(), op, [&]<class T>() {
    const T* src = static_cast<const T*>(in.data_ptr());
    int64_t* dst = static_cast<int64_t*>(out.data_ptr());
#pragma omp parallel for if (outer * inner > kParallelGrain && outer > 1)
    for (int64_t o = 0; o < outer; ++o) dst[o] = row_extreme_at<IsMax>(src + o * inner, inner);
  });
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  const op_time::Scope timed(op_time::Kind::reduce);
  dispatch_all(in.dtype(), "reduce", [&]<class T>() {
    const T* src = static_cast<const T*>(in.data_ptr());
    dispatch_all(out.dtype(), "reduce", [&]<class O>() {
      O* dst = static_cast<O*>(out.data_ptr());
#pragma omp parallel for if (outer * inner > kParallelGrain && outer > 1)
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = src + o * inner;
        if (op == ReduceOp::max) {
          dst[o] = store<O>(row_extreme<true>(row, inner));
        } else if (op == ReduceOp::min) {
          dst[o] = store<O>(row_extreme<false>(row, inner));
        } else if constexpr (std::is_floating_point_v<compute_t<T>>) {
          double acc = 0;
          for (int64_t j = 0; j < inner; ++j) acc += static_cast<double>(load(row[j]));
          if (op == ReduceOp::mean) acc /= static_cast<double>(inner);
          dst[o] = convert<O>(acc);
        } else {
          int64_t acc = 0;
          for (int64_t j = 0; j < inner; ++j) acc += static_cast<int64_t>(load(row[j]));
          dst[o] = store<O>(acc);
        }
      }
    });
  });
}

void reduce_columns(ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t size, int64_t inner) {
  const op_time::Scope timed(op_time::Kind::reduce);
  // A task owns one outer index and a block of columns, whose f64 sums stay in registers or L1
  // while it streams down the reduced dim, reading whole cache lines.
  constexpr int64_t kBlock = 128;
  const int64_t blocks = (inner + kBlock - 1) / kBlock, tasks = outer * blocks;
  dispatch_floating(in.dtype(), "reduce", [&]<class T>() {
    const T* src = static_cast<const T*>(in.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
#pragma omp parallel for if (outer * size * inner > kParallelGrain && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / blocks, c0 = (t % blocks) * kBlock, n = std::min(kBlock, inner - c0);
      double acc[kBlock] = {};
      for (int64_t r = 0; r < size; ++r) {
        const T* row = src + (o * size + r) * inner + c0;
        for (int64_t c = 0; c < n; ++c) acc[c] += static_cast<double>(load(row[c]));
      }
      if (op == ReduceOp::mean)
        for (int64_t c = 0; c < n; ++c) acc[c] /= static_cast<double>(size);
      for (int64_t c = 0; c < n; ++c) dst[o * inner + c0 + c] = convert<T>(acc[c]);
    }
  });
}

void argmax_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  arg_extreme_rows<true>("argmax", out, in, outer, inner);
}

void argmin_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  arg_extreme_rows<false>("argmin", out, in, outer, inner);
}

}  // namespace accel::cpu
