// Cross-entropy fused with log-softmax over the rows of [rows, classes] logits, forward and backward.
// Each row goes to a group of threads (a warp, or a block for long rows) that reads it once for a
// running (max, sum of exp); a mean or sum over the rows is one block adding the per-row losses in
// f64 in a fixed order. Targets were checked on the host, so every target here is in range or ignored.
#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/nn.h"
#include "kernels/reduce_math.h"
#include "kernels/rows.cuh"

namespace accel::kernels {

namespace cross_entropy_detail {

constexpr int kSumThreads = 1024;

void dispatch_target(DType dtype, const char* op, auto&& f) {
  if (dtype == DType::i64) f.template operator()<int64_t>();
  else if (dtype == DType::i32) f.template operator()<int32_t>();
  else throw_unsupported_dtype(op, dtype, "i64 or i32");
}

template <class T>
__device__ __forceinline__ MaxSum<compute_t<T>> row_max_sum(const T* x, int64_t classes, RowSlot s, int group) {
  using C = compute_t<T>;
  MaxSum<C> ms{max_identity<C>(), C(0)};
  for (int64_t j = s.lane; j < classes; j += group) online_softmax_add(ms.max, ms.sum, static_cast<C>(load(x[j])));
  return group_reduce(ms, group, MaxSumOp{}, reduce_scratch<MaxSum<C>>());
}

template <class T, class I>
__global__ void __launch_bounds__(kMaxGroup) forward_rows(compute_t<T>* per_row, const T* logits, const I* target,
                                                          int64_t rows, int64_t classes, int64_t ignore_index,
                                                          int group) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  const int64_t t = static_cast<int64_t>(target[s.row]);
  if (t == ignore_index) {  // the whole group takes this branch
    if (s.lane == 0) per_row[s.row] = C(0);
    return;
  }
  const T* x = logits + s.row * classes;
  const MaxSum<C> ms = row_max_sum(x, classes, s, group);
  if (s.lane == 0) per_row[s.row] = cross_entropy_row_loss(static_cast<C>(load(x[t])), ms.max, ms.sum);
}

// One block: out = sum(per_row) / divisor in f64, or 0 when divisor is 0 (a mean of no counted rows).
template <class C>
__global__ void __launch_bounds__(kSumThreads) sum_rows(C* out, const C* per_row, int64_t rows, int64_t divisor) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < rows; i += kSumThreads) acc += static_cast<double>(per_row[i]);
  acc = group_reduce(acc, kSumThreads, SumOp{}, reduce_scratch<double>());
  if (threadIdx.x == 0) out[0] = static_cast<C>(divisor > 0 ? acc / static_cast<double>(divisor) : 0.0);
}

template <class T, class I>
__global__ void __launch_bounds__(kMaxGroup)
    backward_rows(T* grad_logits, const compute_t<T>* grad_loss, bool per_row, const T* logits, const I* target,
                  int64_t rows, int64_t classes, int64_t ignore_index, compute_t<T> divisor, int group) {
  using C = compute_t<T>;
  const RowSlot s = row_slot(group);
  if (s.row >= rows) return;
  T* dx = grad_logits + s.row * classes;
  const int64_t t = static_cast<int64_t>(target[s.row]);
  if (t == ignore_index) {
    for (int64_t j = s.lane; j < classes; j += group) dx[j] = store<T>(C(0));
    return;
  }
  const T* x = logits + s.row * classes;
  const C scale = cross_entropy_row_scale(per_row ? grad_loss[s.row] : grad_loss[0], divisor, false);
  const MaxSum<C> ms = row_max_sum(x, classes, s, group);
  const C inv_sum = C(1) / ms.sum;
  for (int64_t j = s.lane; j < classes; j += group)
    dx[j] = store<T>(cross_entropy_grad_elem(static_cast<C>(load(x[j])), ms.max, inv_sum, j == t, scale));
}

}  // namespace cross_entropy_detail

void launch_cross_entropy(DType dtype, DType target_dtype, void* per_row_loss, void* reduction_out,
                          const void* logits, const void* target, int64_t rows, int64_t classes, int64_t ignore_index,
                          int64_t divisor, cudaStream_t stream) {
  using namespace cross_entropy_detail;
  dispatch_floating(dtype, "cross_entropy", [&]<class T>() {
    using C = compute_t<T>;
    C* per_row = static_cast<C*>(per_row_loss);
    if (rows > 0) {
      dispatch_target(target_dtype, "cross_entropy", [&]<class I>() {
        const RowPlan plan = plan_rows(classes, 0, 0);
        cuda::check_grid("cross_entropy", plan.blocks(rows));
        forward_rows<T, I><<<static_cast<unsigned>(plan.blocks(rows)), plan.threads, 0, stream>>>(
            per_row, static_cast<const T*>(logits), static_cast<const I*>(target), rows, classes, ignore_index,
            plan.group);
        cuda::check_launch("cross_entropy");
      });
    }
    if (reduction_out != nullptr) {
      sum_rows<C><<<1, kSumThreads, 0, stream>>>(static_cast<C*>(reduction_out), per_row, rows, divisor);
      cuda::check_launch("cross_entropy");
    }
  });
}

void launch_cross_entropy_backward(DType dtype, DType target_dtype, void* grad_logits, const void* grad_loss,
                                   bool per_row, const void* logits, const void* target, int64_t rows,
                                   int64_t classes, int64_t ignore_index, int64_t divisor, cudaStream_t stream) {
  using namespace cross_entropy_detail;
  if (rows == 0) return;
  dispatch_floating(dtype, "cross_entropy_backward", [&]<class T>() {
    using C = compute_t<T>;
    dispatch_target(target_dtype, "cross_entropy_backward", [&]<class I>() {
      const RowPlan plan = plan_rows(classes, 0, 0);
      cuda::check_grid("cross_entropy_backward", plan.blocks(rows));
      backward_rows<T, I><<<static_cast<unsigned>(plan.blocks(rows)), plan.threads, 0, stream>>>(
          static_cast<T*>(grad_logits), static_cast<const C*>(grad_loss), per_row, static_cast<const T*>(logits),
          static_cast<const I*>(target), rows, classes, ignore_index, static_cast<C>(divisor), plan.group);
      cuda::check_launch("cross_entropy_backward");
    });
  });
}

}  // namespace accel::kernels
