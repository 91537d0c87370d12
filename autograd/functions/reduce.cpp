// Differentiable reductions: the grad is broadcast back over the reduced dims.
#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// The reduced dims, normalised and sorted (all dims when dims is empty).
std::vector<int64_t> reduced_dims(const char* op, const Tensor& t, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < t.dim(); ++d) out.push_back(d);
  } else {
    for (int64_t d : dims) out.push_back(normalize_dim(op, d, t.dim()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Grad of a keepdim=false reduction, reshaped to keepdim=true and broadcast to the input.
Tensor expand_back(const Tensor& grad, const Shape& in_shape, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor g = grad;
  if (!keepdim)
    for (int64_t d : dims) g = nograd::unsqueeze(g, d);
  return nograd::expand(g, in_shape);
}

}  // namespace

Tensor sum(const Tensor& t_in, const std::vector<int64_t>& dims, bool keepdim) {
  const Tensor t = autocast::to_reduction(t_in);
  Tensor out = nograd::sum(t, dims, keepdim);
  record("SumBackward", {t}, {out}, [shape = t.shape(), d = reduced_dims("sum", t, dims), keepdim](const Grads& g) -> Grads {
    return {expand_back(g[0], shape, d, keepdim)};
  });
  return out;
}

Tensor sum(const Tensor& t) { return sum(t, {}, false); }

Tensor mean(const Tensor& t_in, const std::vector<int64_t>& dims, bool keepdim) {
  const Tensor t = autocast::to_reduction(t_in);
  Tensor out = nograd::mean(t, dims, keepdim);
  const std::vector<int64_t> d = reduced_dims("mean", t, dims);
  int64_t count = 1;
  for (int64_t k : d) count *= t.shape()[k];
  record("MeanBackward", {t}, {out}, [shape = t.shape(), d, keepdim, count](const Grads& g) -> Grads {
    return {expand_back(nograd::div(g[0], static_cast<double>(count)), shape, d, keepdim)};
  });
  return out;
}

Tensor mean(const Tensor& t) { return mean(t, {}, false); }

namespace {

// max or min over dims (is_max); the grad goes to the elements equal to the result, shared equally
// between ties.
Tensor extreme(const char* name, const char* node, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
               bool is_max) {
  Tensor out = is_max ? nograd::max(t, dims, keepdim) : nograd::min(t, dims, keepdim);
  record(node, {t}, {out},
         [t = detach(t), out = detach(out), d = reduced_dims(name, t, dims), keepdim](const Grads& g) -> Grads {
           const Tensor is_extreme = nograd::eq(t, expand_back(out, t.shape(), d, keepdim));
           const Tensor count = nograd::sum(nograd::to_dtype(is_extreme, g[0].dtype()), d, true);
           const Tensor share = nograd::div(expand_back(g[0], t.shape(), d, keepdim), nograd::expand(count, t.shape()));
           return {nograd::where(is_extreme, share, scalar_tensor(0.0, g[0].dtype(), g[0].device()))};
         });
  return out;
}

}  // namespace

Tensor max(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("max", "MaxBackward", t, dims, keepdim, true);
}
Tensor max(const Tensor& t) { return max(t, {}, false); }
Tensor min(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("min", "MinBackward", t, dims, keepdim, false);
}
Tensor min(const Tensor& t) { return min(t, {}, false); }

Tensor argmax(const Tensor& t, int64_t dim, bool keepdim) { return nograd::argmax(t, dim, keepdim); }
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim) { return nograd::argmin(t, dim, keepdim); }

ValuesAndIndices max_along(const Tensor& t, int64_t dim, bool keepdim) {
  return {max(t, {dim}, keepdim), argmax(t, dim, keepdim)};
}
ValuesAndIndices min_along(const Tensor& t, int64_t dim, bool keepdim) {
  return {min(t, {dim}, keepdim), argmin(t, dim, keepdim)};
}

}  // namespace accel
