// CPU softmax: each task owns one outer index and a block of up to kColumns inner columns, and walks
// the softmax dim three times (max, sum, write). For a softmax over the last dim (inner == 1) a task
// is one row; for an inner dim the block keeps each pass reading whole cache lines.
#include "tensor/cpu/softmax.h"

#include <algorithm>
#include <limits>

#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/nn_math.h"

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

}  // namespace

void softmax(const Tensor& out, const Tensor& x, int64_t outer, int64_t size, int64_t inner, bool is_log) {
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    using C = compute_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
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

}  // namespace accel::cpu
