// CPU softmax: each task owns one outer index and a block of up to kColumns inner columns, and walks
// the softmax dim three times (max, sum, write); for an inner dim the block keeps each pass reading
// whole cache lines. A softmax of f32/f64 over the last dim (inner == 1, the attention case) is a
// row of Eigen array operations instead, so its exp runs on vectors.
#include "tensor/cpu/softmax.h"

#include <algorithm>
#include <limits>

#include "kernels/nn_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/op_time.h"

namespace accel::cpu {

namespace {

constexpr int64_t kColumns = 64;

// Calls task(base, n) for every (outer index, column block): base is the element offset of the
// block's first column at position 0 of the softmax dim, n its column count.
template <class Task>
void for_each_block(int64_t outer, int64_t size, int64_t inner, Task&& task) {
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  const int64_t tasks = outer * blocks;
#pragma omp parallel for if (outer * size * inner > kParallelGrain && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
    task(o * size * inner + c0, std::min(kColumns, inner - c0));
  }
}

// Calls row(o) for each of `rows` rows of `size` elements, on all threads when there is enough work.
template <class Row>
void for_each_row_of(int64_t rows, int64_t size, Row&& row) {
#pragma omp parallel for if (rows * size > kParallelGrain && rows > 1)
  for (int64_t o = 0; o < rows; ++o) row(o);
}

}  // namespace

void softmax(const Tensor& out, const Tensor& x, int64_t outer, int64_t size, int64_t inner, bool is_log) {
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    using C = compute_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    if constexpr (std::is_same_v<T, C>) {
      if (inner == 1 && size > 0) {
        for_each_row_of(outer, size, [&](int64_t o) {
          const ConstVecMap<C> in(src + o * size, size);
          VecMap<C> y(dst + o * size, size);
          const C row_max = in.maxCoeff();
          if (is_log) {
            y = in - row_max;
            const C log_sum = math_log(y.exp().sum());
            y -= log_sum;  // log_softmax_elem: x - max - log_sum
          } else {
            y = (in - row_max).exp();
            y *= C(1) / y.sum();  // softmax_elem: exp(x - max) * inv_sum
          }
        });
        return;
      }
    }
    for_each_block(outer, size, inner, [&](int64_t base, int64_t n) {
      C row_max[kColumns], acc[kColumns];
      std::fill_n(row_max, n, -std::numeric_limits<C>::infinity());
      std::fill_n(acc, n, C(0));
      for (int64_t j = 0; j < size; ++j) {
        const T* in = src + base + j * inner;
        for (int64_t c = 0; c < n; ++c) row_max[c] = std::max(row_max[c], load(in[c]));
      }
      for (int64_t j = 0; j < size; ++j) {
        const T* in = src + base + j * inner;
        for (int64_t c = 0; c < n; ++c) acc[c] += math_exp(load(in[c]) - row_max[c]);
      }
      for (int64_t c = 0; c < n; ++c) acc[c] = is_log ? math_log(acc[c]) : C(1) / acc[c];
      for (int64_t j = 0; j < size; ++j) {
        const T* in = src + base + j * inner;
        T* o = dst + base + j * inner;
        if (is_log) {
          for (int64_t c = 0; c < n; ++c) o[c] = store<T>(log_softmax_elem(load(in[c]), row_max[c], acc[c]));
        } else {
          for (int64_t c = 0; c < n; ++c) o[c] = store<T>(softmax_elem(load(in[c]), row_max[c], acc[c]));
        }
      }
    });
  });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t outer,
                      int64_t size, int64_t inner, bool is_log) {
  dispatch_floating(out.dtype(), "softmax_backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* y = static_cast<const T*>(out.data_ptr());
    T* dx = static_cast<T*>(grad_in.data_ptr());
    if constexpr (std::is_same_v<T, C>) {
      if (inner == 1 && size > 0) {
        for_each_row_of(outer, size, [&](int64_t o) {
          const ConstVecMap<C> g(dy + o * size, size), out_row(y + o * size, size);
          VecMap<C> d(dx + o * size, size);
          if (is_log) {
            d = g - out_row.exp() * g.sum();  // log_softmax_backward_elem
          } else {
            d = out_row * (g - (g * out_row).sum());  // softmax_backward_elem
          }
        });
        return;
      }
    }
    for_each_block(outer, size, inner, [&](int64_t base, int64_t n) {
      C acc[kColumns];  // sum(dy * y) for softmax, sum(dy) for log-softmax
      std::fill_n(acc, n, C(0));
      for (int64_t j = 0; j < size; ++j) {
        const int64_t at = base + j * inner;
        if (is_log) {
          for (int64_t c = 0; c < n; ++c) acc[c] += load(dy[at + c]);
        } else {
          for (int64_t c = 0; c < n; ++c) acc[c] += load(dy[at + c]) * load(y[at + c]);
        }
      }
      for (int64_t j = 0; j < size; ++j) {
        const int64_t at = base + j * inner;
        if (is_log) {
          for (int64_t c = 0; c < n; ++c)
            dx[at + c] = store<T>(log_softmax_backward_elem(load(dy[at + c]), load(y[at + c]), acc[c]));
        } else {
          for (int64_t c = 0; c < n; ++c)
            dx[at + c] = store<T>(softmax_backward_elem(load(dy[at + c]), load(y[at + c]), acc[c]));
        }
      }
    });
  });
}

void causal_softmax(const Tensor& out, const Tensor& x, int64_t tq, int64_t tk, double scale) {
  const op_time::Scope timed(op_time::Kind::attention);
  const int64_t rows = x.numel() / std::max<int64_t>(tk, 1);
  dispatch_floating(x.dtype(), "causal_softmax", [&]<class T>() {
    using C = compute_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    const C s = static_cast<C>(scale);
    for_each_row_of(rows, tk, [&](int64_t r) {
      const int64_t seen = r % tq + 1 + tk - tq;  // columns [0, seen) are the past and present
      const T* in = src + r * tk;
      T* y = dst + r * tk;
      if constexpr (std::is_same_v<T, C>) {
        VecMap<C> v(y, seen);
        v = ConstVecMap<C>(in, seen) * s;
        v = (v - v.maxCoeff()).exp();
        v *= C(1) / v.sum();
      } else {
        C row_max = -std::numeric_limits<C>::infinity();
        for (int64_t j = 0; j < seen; ++j) row_max = std::max(row_max, load(in[j]) * s);
        C sum = 0;
        for (int64_t j = 0; j < seen; ++j) sum += math_exp(load(in[j]) * s - row_max);
        const C inv_sum = C(1) / sum;
        for (int64_t j = 0; j < seen; ++j) y[j] = store<T>(softmax_elem(load(in[j]) * s, row_max, inv_sum));
      }
      std::fill(y + seen, y + tk, store<T>(C(0)));
    });
  });
}

void causal_softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, double scale) {
  const op_time::Scope timed(op_time::Kind::attention);
  const int64_t tk = out.size(-1), rows = out.numel() / std::max<int64_t>(tk, 1);
  dispatch_floating(out.dtype(), "causal_softmax_backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* y = static_cast<const T*>(out.data_ptr());
    T* dx = static_cast<T*>(grad_in.data_ptr());
    const C s = static_cast<C>(scale);
    // Masked entries have y = 0, so the formula gives them 0 without knowing where the mask is.
    for_each_row_of(rows, tk, [&](int64_t r) {
      const int64_t at = r * tk;
      if constexpr (std::is_same_v<T, C>) {
        const ConstVecMap<C> g(dy + at, tk), out_row(y + at, tk);
        VecMap<C>(dx + at, tk) = out_row * (g - (g * out_row).sum()) * s;
      } else {
        C dot = 0;
        for (int64_t j = 0; j < tk; ++j) dot += load(dy[at + j]) * load(y[at + j]);
        for (int64_t j = 0; j < tk; ++j)
          dx[at + j] = store<T>(softmax_backward_elem(load(dy[at + j]), load(y[at + j]), dot) * s);
      }
    });
  });
}

}  // namespace accel::cpu
