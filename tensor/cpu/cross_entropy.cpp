// CPU cross-entropy: rows in parallel, each with a max pass and a sum-of-exp pass; the per-row losses
// are then reduced in row order (in f64), so a mean or sum does not depend on the thread count. The
// weighted, smoothed form has loops of its own, so the plain one stays as it was.
#include "tensor/cpu/cross_entropy.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/nn_math.h"
#include "tensor/cpu/index_check.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/op_time.h"

namespace accel::cpu {

namespace {

// The max of a row and sum(exp(x - max)); f32/f64 rows go through Eigen's vectorised exp.
template <class T, class C = compute_t<T>>
void row_stats(const T* row, int64_t classes, C& row_max, C& sum_exp) {
  if constexpr (std::is_same_v<T, C>) {
    if (classes > 0) {
      const ConstVecMap<C> x(row, classes);
      row_max = x.maxCoeff();
      sum_exp = (x - row_max).exp().sum();
      return;
    }
  }
  row_max = -std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < classes; ++j) row_max = std::max(row_max, load(row[j]));
  sum_exp = 0;
  for (int64_t j = 0; j < classes; ++j) sum_exp += math_exp(load(row[j]) - row_max);
}

// Class c's weight: weight[c], or 1 without weights.
template <class C>
C class_weight(const C* weight, int64_t c) {
  return weight != nullptr ? weight[c] : C(1);
}

// sum_c w[c] * (lse - x[c]) over a row, accumulated in f64 (it adds every class of a long row); f32
// and f64 rows go through Eigen.
template <class T, class C>
C smooth_sum(const T* row, int64_t classes, const C* weight, C lse) {
  if constexpr (std::is_same_v<T, C>) {
    const auto gap = lse - ConstVecMap<C>(row, classes);
    if (weight == nullptr) return static_cast<C>(gap.template cast<double>().sum());
    return static_cast<C>((gap * ConstVecMap<C>(weight, classes)).template cast<double>().sum());
  }
  double acc = 0;
  for (int64_t j = 0; j < classes; ++j) acc += static_cast<double>(class_weight(weight, j) * (lse - load(row[j])));
  return static_cast<C>(acc);
}

// One row of the weighted, smoothed grad into o: cross_entropy_smoothed_grad_elem, in array form
// (the same operations in the same order) for f32 and f64.
template <class T, class C>
void smoothed_grad_row(T* o, const T* row, int64_t classes, int64_t target, const C* weight, C row_max, C inv_sum,
                       SmoothedGradCoefs<C> k, C scale) {
  if constexpr (std::is_same_v<T, C>) {
    VecMap<C> d(o, classes);
    d = (ConstVecMap<C>(row, classes) - row_max).exp() * inv_sum * k.on_softmax;
    d[target] -= k.on_target;
    if (weight != nullptr) d -= ConstVecMap<C>(weight, classes) * k.on_weight;
    else d -= k.on_weight;
    d *= scale;
    return;
  }
  for (int64_t j = 0; j < classes; ++j)
    o[j] = store<T>(cross_entropy_smoothed_grad_elem(load(row[j]), row_max, inv_sum, j == target,
                                                     class_weight(weight, j), k, scale));
}

// What a weighted mean divides by: the counted targets' weights, summed in row order in f64.
template <class I, class C>
double counted_weight(const I* target, int64_t rows, const C* weight, int64_t ignore_index) {
  double total = 0;
  for (int64_t n = 0; n < rows; ++n)
    if (static_cast<int64_t>(target[n]) != ignore_index)
      total += static_cast<double>(class_weight(weight, static_cast<int64_t>(target[n])));
  return total;
}

template <class C>
const C* weight_data(const CrossEntropyOptions& options) {
  return options.weight.defined() ? static_cast<const C*>(options.weight.data_ptr()) : nullptr;
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                   nograd::Reduction reduction) {
  const op_time::Scope timed(op_time::Kind::cross_entropy);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  dispatch_index(target.dtype(), "cross_entropy", [&]<class I>() {
    const I* tgt = static_cast<const I*>(target.data_ptr());
    const int64_t counted = check_targets("cross_entropy", tgt, rows, classes, ignore_index);
    dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
      using C = compute_t<T>;  // also the loss dtype's storage type
      const T* x = static_cast<const T*>(logits.data_ptr());
      C* out = static_cast<C*>(loss.data_ptr());
      std::vector<C> row_losses(reduction == nograd::Reduction::none ? 0 : static_cast<size_t>(rows));
      C* per_row = reduction == nograd::Reduction::none ? out : row_losses.data();
#pragma omp parallel for if (rows * classes > kParallelGrain && rows > 1)
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t t = static_cast<int64_t>(tgt[n]);
        if (t == ignore_index) {
          per_row[n] = 0;
          continue;
        }
        const T* row = x + n * classes;
        C row_max, sum_exp;
        row_stats(row, classes, row_max, sum_exp);
        per_row[n] = cross_entropy_row_loss(load(row[t]), row_max, sum_exp);
      }
      if (reduction == nograd::Reduction::none) return;
      double total = 0;
      for (int64_t n = 0; n < rows; ++n) total += static_cast<double>(row_losses[n]);
      // All rows ignored: the mean of nothing is 0, so a batch of padding adds no NaN.
      if (reduction == nograd::Reduction::mean) total = counted > 0 ? total / static_cast<double>(counted) : 0.0;
      out[0] = static_cast<C>(total);
    });
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, int64_t ignore_index, nograd::Reduction reduction) {
  const op_time::Scope timed(op_time::Kind::cross_entropy);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  dispatch_index(target.dtype(), "cross_entropy_backward", [&]<class I>() {
    const I* tgt = static_cast<const I*>(target.data_ptr());
    const int64_t counted = check_targets("cross_entropy_backward", tgt, rows, classes, ignore_index);
    dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(logits.data_ptr());
      const C* g = static_cast<const C*>(grad_loss.data_ptr());
      T* dx = static_cast<T*>(grad_logits.data_ptr());
      const bool per_row = reduction == nograd::Reduction::none;
      const C divisor = reduction == nograd::Reduction::mean ? static_cast<C>(std::max<int64_t>(counted, 1)) : C(1);
#pragma omp parallel for if (rows * classes > kParallelGrain && rows > 1)
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t t = static_cast<int64_t>(tgt[n]);
        const C scale = cross_entropy_row_scale(per_row ? g[n] : g[0], divisor, t == ignore_index);
        const T* row = x + n * classes;
        T* o = dx + n * classes;
        if (t == ignore_index) {
          std::fill_n(o, classes, store<T>(C(0)));
          continue;
        }
        C row_max, sum_exp;
        row_stats(row, classes, row_max, sum_exp);
        const C inv_sum = C(1) / sum_exp;
        if constexpr (std::is_same_v<T, C>) {
          // cross_entropy_grad_elem in array form: scale * (softmax - onehot).
          VecMap<C> d(o, classes);
          d = (ConstVecMap<C>(row, classes) - row_max).exp() * inv_sum;
          d[t] -= C(1);
          d *= scale;
          continue;
        }
        for (int64_t j = 0; j < classes; ++j)
          o[j] = store<T>(cross_entropy_grad_elem(load(row[j]), row_max, inv_sum, j == t, scale));
      }
    });
  });
}

void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const op_time::Scope timed(op_time::Kind::cross_entropy);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const nograd::Reduction reduction = options.reduction;
  dispatch_index(target.dtype(), "cross_entropy", [&]<class I>() {
    const I* tgt = static_cast<const I*>(target.data_ptr());
    check_targets("cross_entropy", tgt, rows, classes, options.ignore_index);
    dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(logits.data_ptr());
      const C* w = weight_data<C>(options);
      const C eps = static_cast<C>(options.label_smoothing), n_classes = static_cast<C>(classes);
      C* out = static_cast<C*>(loss.data_ptr());
      std::vector<C> row_losses(reduction == nograd::Reduction::none ? 0 : static_cast<size_t>(rows));
      C* per_row = reduction == nograd::Reduction::none ? out : row_losses.data();
#pragma omp parallel for if (rows * classes > kParallelGrain && rows > 1)
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t t = static_cast<int64_t>(tgt[n]);
        if (t == options.ignore_index) {
          per_row[n] = 0;
          continue;
        }
        const T* row = x + n * classes;
        C row_max, sum_exp;
        row_stats(row, classes, row_max, sum_exp);
        const C lse = row_max + math_log(sum_exp);
        const C smooth = eps > C(0) ? smooth_sum(row, classes, w, lse) : C(0);
        per_row[n] = cross_entropy_smoothed_row_loss(lse - load(row[t]), class_weight(w, t), smooth, eps, n_classes);
      }
      if (reduction == nograd::Reduction::none) return;
      double total = 0;
      for (int64_t n = 0; n < rows; ++n) total += static_cast<double>(row_losses[n]);
      if (reduction == nograd::Reduction::mean) {
        const double divisor = counted_weight(tgt, rows, w, options.ignore_index);
        total = divisor != 0 ? total / divisor : 0.0;  // a mean over no weight is 0, as over no rows
      }
      out[0] = static_cast<C>(total);
    });
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, const CrossEntropyOptions& options) {
  const op_time::Scope timed(op_time::Kind::cross_entropy);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  dispatch_index(target.dtype(), "cross_entropy_backward", [&]<class I>() {
    const I* tgt = static_cast<const I*>(target.data_ptr());
    check_targets("cross_entropy_backward", tgt, rows, classes, options.ignore_index);
    dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
      using C = compute_t<T>;
      const T* x = static_cast<const T*>(logits.data_ptr());
      const C* g = static_cast<const C*>(grad_loss.data_ptr());
      const C* w = weight_data<C>(options);
      T* dx = static_cast<T*>(grad_logits.data_ptr());
      const C eps = static_cast<C>(options.label_smoothing), n_classes = static_cast<C>(classes);
      double all_weight = 0;
      for (int64_t j = 0; j < classes; ++j) all_weight += static_cast<double>(class_weight(w, j));
      const bool per_row = options.reduction == nograd::Reduction::none;
      const double divisor =
          options.reduction == nograd::Reduction::mean ? counted_weight(tgt, rows, w, options.ignore_index) : 1.0;
#pragma omp parallel for if (rows * classes > kParallelGrain && rows > 1)
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t t = static_cast<int64_t>(tgt[n]);
        T* o = dx + n * classes;
        // Ignored rows, and every row of a mean over no weight (whose loss is constantly 0), get 0.
        if (t == options.ignore_index || divisor == 0) {
          std::fill_n(o, classes, store<T>(C(0)));
          continue;
        }
        const C scale = cross_entropy_row_scale(per_row ? g[n] : g[0], static_cast<C>(divisor), false);
        const T* row = x + n * classes;
        C row_max, sum_exp;
        row_stats(row, classes, row_max, sum_exp);
        const C inv_sum = C(1) / sum_exp;
        const SmoothedGradCoefs<C> k =
            cross_entropy_smoothed_coefs(class_weight(w, t), static_cast<C>(all_weight), eps, n_classes);
        smoothed_grad_row(o, row, classes, t, w, row_max, inv_sum, k, scale);
      }
    });
  });
}

}  // namespace accel::cpu
