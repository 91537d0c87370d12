// The four differentiable collectives: the collective of each direction on the tensor-parallel group,
// recorded as one node whose backward runs the adjoint collective.
#include "nn/parallel/tp_mappings.h"

#include <fmt/format.h>

#include <numeric>
#include <vector>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

namespace accel::nn::parallel {

namespace {

using Grads = std::vector<Tensor>;

void check_input(const char* op, const Tensor& x, const Communicator& tp) {
  if (!x.defined()) throw Error(fmt::format("{}: the input is undefined", op));
  if (x.device() != tp.device())
    throw Error(fmt::format("{}: the input is on {}, but the tensor-parallel communicator ({}) moves tensors on {}", op,
                            x.device().str(), tp.backend(), tp.device().str()));
}

void check_has_last_dim(const char* op, const Tensor& x) {
  if (x.dim() == 0) throw Error(fmt::format("{}: needs a tensor with at least one dim, got a 0-d tensor", op));
}

// The sum over the group of every rank's t, in a new tensor (t itself, the grad handed to a backward
// say, is left as it is).
Tensor all_reduce_sum(const Tensor& t, Communicator& tp, const char* site) {
  const Tensor in = nograd::contiguous(t);
  Tensor out = empty(in.shape(), in.dtype(), in.device());
  tp.all_reduce(in, out, ReduceOp::sum, site);
  return out;
}

// Every rank's [..., d] side by side along the last dim: [..., size * d], rank r's at [r d, (r + 1) d).
Tensor all_gather_last_dim(const Tensor& t, Communicator& tp, const char* site) {
  const Tensor part = nograd::contiguous(t);
  const int64_t k = part.dim() - 1;  // the last dim
  Shape stacked_shape{tp.size()};
  stacked_shape.insert(stacked_shape.end(), part.shape().begin(), part.shape().end());
  Tensor stacked = empty(stacked_shape, part.dtype(), part.device());
  tp.all_gather(part, stacked, site);
  // [size, ..., d] -> [..., size, d] -> [..., size * d]
  std::vector<int64_t> order(static_cast<size_t>(k + 2));
  std::iota(order.begin(), order.begin() + k, 1);
  order[static_cast<size_t>(k)] = 0;
  order[static_cast<size_t>(k + 1)] = k + 1;
  Shape out_shape = part.shape();
  out_shape.back() *= tp.size();
  return nograd::contiguous(nograd::reshape(nograd::permute(stacked, order), out_shape));
}

// This rank's columns of the last dim, in a contiguous copy so that the part is a tensor of its own.
Tensor rank_columns(const Tensor& t, const Communicator& tp) {
  const int64_t width = t.size(-1) / tp.size();
  return nograd::contiguous(nograd::narrow(t, -1, tp.rank() * width, width));
}

}  // namespace

Tensor copy_to_tp_region(const Tensor& x, Communicator& tp) {
  check_input("copy_to_tp_region", x, tp);
  if (tp.size() == 1) return x;
  Tensor out = detach(x);  // the same values under a node of its own
  autograd::record("CopyToTensorParallelRegionBackward", {x}, {out}, [&tp](const Grads& g) -> Grads {
    return {all_reduce_sum(g[0], tp, "tp copy_to_tp_region backward all-reduce")};
  });
  return out;
}

Tensor reduce_from_tp_region(const Tensor& x, Communicator& tp) {
  check_input("reduce_from_tp_region", x, tp);
  if (tp.size() == 1) return x;
  Tensor out = all_reduce_sum(x, tp, "tp reduce_from_tp_region all-reduce");
  autograd::record("ReduceFromTensorParallelRegionBackward", {x}, {out},
                   [](const Grads& g) -> Grads { return {g[0]}; });
  return out;
}

Tensor gather_from_tp_region(const Tensor& x, Communicator& tp) {
  check_input("gather_from_tp_region", x, tp);
  check_has_last_dim("gather_from_tp_region", x);
  if (tp.size() == 1) return x;
  Tensor out = all_gather_last_dim(x, tp, "tp gather_from_tp_region all-gather");
  autograd::record("GatherFromTensorParallelRegionBackward", {x}, {out},
                   [&tp](const Grads& g) -> Grads { return {rank_columns(g[0], tp)}; });
  return out;
}

Tensor scatter_to_tp_region(const Tensor& x, Communicator& tp) {
  check_input("scatter_to_tp_region", x, tp);
  check_has_last_dim("scatter_to_tp_region", x);
  if (x.size(-1) % tp.size() != 0)
    throw Error(fmt::format("scatter_to_tp_region: the last dim of {} ({}) is not a multiple of the tensor-parallel "
                            "size {}",
                            shape_str(x.shape()), x.size(-1), tp.size()));
  if (tp.size() == 1) return x;
  Tensor out = rank_columns(x, tp);
  autograd::record("ScatterToTensorParallelRegionBackward", {x}, {out}, [&tp](const Grads& g) -> Grads {
    return {all_gather_last_dim(g[0], tp, "tp scatter_to_tp_region backward all-gather")};
  });
  return out;
}

}  // namespace accel::nn::parallel
