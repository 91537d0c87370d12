// Raw reductions: move the reduced dims to the end, make the rows contiguous, reduce each row.
#include "tensor/nograd/reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "tensor/cpu/reduce.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/reduce.h"
#endif

namespace accel::nograd {

namespace {

struct Plan {
  Tensor rows;   // contiguous [outer, inner]
  Shape out_shape;
  int64_t outer = 1, inner = 1;
};

Plan plan_reduction(const char* op, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  if (!t.defined()) throw Error(fmt::format("{}: got an undefined tensor", op));
  std::vector<bool> reduced(static_cast<size_t>(t.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(op, d, t.dim());
    if (t.dim() == 0) continue;
    if (reduced[n] && !dims.empty())
      throw Error(fmt::format("{}: dim {} appears twice in {}", op, n, shape_str(dims)));
    reduced[n] = true;
  }
  Plan plan;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (reduced[d]) {
      plan.inner *= t.shape()[d];
      if (keepdim) plan.out_shape.push_back(1);
    } else {
      order.push_back(d);
      plan.outer *= t.shape()[d];
      plan.out_shape.push_back(t.shape()[d]);
    }
  }
  for (int64_t d = 0; d < t.dim(); ++d)
    if (reduced[d]) order.push_back(d);
  plan.rows = contiguous(permute(t, order));
  return plan;
}

DType sum_dtype(DType in) { return is_floating(in) ? in : DType::i64; }

// For a floating sum or mean of a contiguous CPU tensor over one run of adjacent dims followed by kept
// dims (a bias grad: [rows, out] summed over rows): the [outer, size, inner] split, else nullopt.
struct ColumnSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
std::optional<ColumnSplit> column_split(cpu::ReduceOp op, const Tensor& t, const std::vector<int64_t>& dims) {
  if (op == cpu::ReduceOp::max || op == cpu::ReduceOp::min || !is_floating(t.dtype()) || !t.device().is_cpu() ||
      !t.is_contiguous() || dims.empty() || t.dim() == 0)
    return std::nullopt;
  std::vector<bool> reduced(static_cast<size_t>(t.dim()), false);
  for (int64_t d : dims) {
    const int64_t n = normalize_dim("sum", d, t.dim());
    if (reduced[n]) return std::nullopt;  // the general path reports the repeat
    reduced[n] = true;
  }
  int64_t first = t.dim(), last = -1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (reduced[d]) first = std::min(first, d), last = d;
  ColumnSplit s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < first) s.outer *= t.shape()[d];
    else if (d <= last) {
      if (!reduced[d]) return std::nullopt;  // not one run of dims
      s.size *= t.shape()[d];
    } else {
      s.inner *= t.shape()[d];
    }
  }
  if (s.inner == 1) return std::nullopt;  // rows: the general path reads them in place already
  return s;
}

Tensor reduce(cpu::ReduceOp op, const char* name, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  if (!t.defined()) throw Error(fmt::format("{}: got an undefined tensor", name));
  if (is_float8(t.dtype())) throw_unsupported_dtype(name, t.dtype(), "a dtype that computes");
  if (const auto split = column_split(op, t, dims)) {
    Shape out_shape;
    for (int64_t d = 0; d < t.dim(); ++d) {
      const bool is_reduced = std::find_if(dims.begin(), dims.end(), [&](int64_t k) {
                                return normalize_dim(name, k, t.dim()) == d;
                              }) != dims.end();
      if (!is_reduced) out_shape.push_back(t.shape()[d]);
      else if (keepdim) out_shape.push_back(1);
    }
    Tensor out = empty(out_shape, t.dtype(), t.device());
    cpu::reduce_columns(op, out, t, split->outer, split->size, split->inner);
    return out;
  }
  Plan plan = plan_reduction(name, t, dims, keepdim);
  const bool keeps_dtype = op == cpu::ReduceOp::max || op == cpu::ReduceOp::min;
  if (keeps_dtype && plan.inner == 0)
    throw Error(fmt::format("{}: cannot take the {} over an empty dim of {}", name, name, shape_str(t.shape())));
  if (op == cpu::ReduceOp::mean && !is_floating(t.dtype()))
    throw_unsupported_dtype(name, t.dtype(), "a floating dtype");
  Tensor out = empty(plan.out_shape, keeps_dtype ? t.dtype() : sum_dtype(t.dtype()), t.device());
  if (op == cpu::ReduceOp::min && !t.device().is_cpu()) {
    // CUDA has no min kernel: a floating min is -max(-t), exact and with max's NaN rule; other
    // dtypes go through the CPU's loop on a host copy.
    if (!is_floating(t.dtype()))
      return to_device(reduce(op, name, to_device(t, Device::cpu()), dims, keepdim), t.device());
    ACCEL_DISPATCH(name, t.device(), reduce_rows, cpu::ReduceOp::max, out, neg(plan.rows), plan.outer, plan.inner);
    return neg(out);
  }
  ACCEL_DISPATCH(name, t.device(), reduce_rows, op, out, plan.rows, plan.outer, plan.inner);
  return out;
}

// argmax (is_max) or argmin over one dim, as i64.
Tensor arg_extreme(bool is_max, const char* name, const Tensor& t, int64_t dim, bool keepdim) {
  if (!t.defined()) throw Error(fmt::format("{}: got an undefined tensor", name));
  if (is_float8(t.dtype())) throw_unsupported_dtype(name, t.dtype(), "a dtype that computes");
  const int64_t d = normalize_dim(name, dim, t.dim());
  Plan plan = plan_reduction(name, t, {d}, keepdim);
  if (plan.inner == 0) throw Error(fmt::format("{}: dim {} of {} is empty", name, d, shape_str(t.shape())));
  Tensor out = empty(plan.out_shape, DType::i64, t.device());
  if (is_max) {
    ACCEL_DISPATCH(name, t.device(), argmax_rows, out, plan.rows, plan.outer, plan.inner);
  } else if (t.device().is_cpu()) {
    cpu::argmin_rows(out, plan.rows, plan.outer, plan.inner);
  } else if (is_floating(t.dtype())) {  // as min: the first maximum of -t is the first minimum of t
    ACCEL_DISPATCH(name, t.device(), argmax_rows, out, neg(plan.rows), plan.outer, plan.inner);
  } else {
    return to_device(arg_extreme(false, name, to_device(t, Device::cpu()), dim, keepdim), t.device());
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(cpu::ReduceOp::sum, "sum", t, dims, keepdim);
}
Tensor sum(const Tensor& t) { return sum(t, {}, false); }
Tensor mean(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(cpu::ReduceOp::mean, "mean", t, dims, keepdim);
}
Tensor mean(const Tensor& t) { return mean(t, {}, false); }
Tensor max(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(cpu::ReduceOp::max, "max", t, dims, keepdim);
}
Tensor max(const Tensor& t) { return max(t, {}, false); }

Tensor min(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(cpu::ReduceOp::min, "min", t, dims, keepdim);
}
Tensor min(const Tensor& t) { return min(t, {}, false); }

Tensor argmax(const Tensor& t, int64_t dim, bool keepdim) { return arg_extreme(true, "argmax", t, dim, keepdim); }
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim) { return arg_extreme(false, "argmin", t, dim, keepdim); }

Tensor sum_to_shape(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  if (broadcast_shapes("sum_to_shape", t.shape(), shape) != t.shape())
    throw Error(fmt::format("sum_to_shape: {} is not a broadcast of {}", shape_str(t.shape()), shape_str(shape)));
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && t.shape()[d] != 1)) dims.push_back(d);
  if (dims.empty()) return reshape(t, shape);
  return reshape(sum(t, dims, true), shape);
}

}  // namespace accel::nograd
