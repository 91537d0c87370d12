// Raw matmul entry point: checks the operands, lifts 1-d vectors to matrices, broadcasts the batch
// dims (as stride-0 views, no copy) and dispatches one call per device.
#include "tensor/nograd/matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "tensor/cpu/matmul.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/matmul.h"
#endif

namespace accel::nograd {

namespace {

Shape concat(Shape head, std::initializer_list<int64_t> tail) {
  head.insert(head.end(), tail);
  return head;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) throw Error("matmul: got an undefined tensor");
  const std::string shapes = fmt::format("{} x {}", shape_str(a.shape()), shape_str(b.shape()));
  if (a.dim() == 0 || b.dim() == 0)
    throw Error(fmt::format("matmul: 0-d operand in {}; expected at least 1 dim each (use mul for scalars)", shapes));
  if (a.dtype() != b.dtype())
    throw Error(fmt::format("matmul: dtypes differ: {} {} vs {} {}; cast one with to_dtype", dtype_name(a.dtype()),
                            shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape())));
  if (a.device() != b.device())
    throw Error(fmt::format("matmul: devices differ: {} vs {}", a.device().str(), b.device().str()));
  if (!is_floating(a.dtype())) throw_unsupported_dtype("matmul", a.dtype(), "a floating dtype (f64, f32, f16, bf16)");

  // As in numpy: a vector on the left is a row [1, K], on the right a column [K, 1]; the added
  // dim is dropped from the result.
  const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  const Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  if (b2.size(-2) != k) throw Error(fmt::format("matmul: inner dims differ: {}", shapes));

  const Shape batch_a(a2.shape().begin(), a2.shape().end() - 2), batch_b(b2.shape().begin(), b2.shape().end() - 2);
  const size_t nb = std::max(batch_a.size(), batch_b.size());
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t da = i < nb - batch_a.size() ? 1 : batch_a[i - (nb - batch_a.size())];
    const int64_t db = i < nb - batch_b.size() ? 1 : batch_b[i - (nb - batch_b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(fmt::format("matmul: batch dims {} and {} cannot broadcast: {}", shape_str(batch_a),
                              shape_str(batch_b), shapes));
    batch[i] = da == 1 ? db : da;
  }

  Tensor out = empty(concat(batch, {m, n}), a.dtype(), a.device());
  ACCEL_DISPATCH("matmul", a.device(), matmul, out, expand(a2, concat(batch, {m, k})), expand(b2, concat(batch, {k, n})));
  Shape result = batch;
  if (a.dim() > 1) result.push_back(m);
  if (b.dim() > 1) result.push_back(n);
  return view(out, result);
}

}  // namespace accel::nograd
