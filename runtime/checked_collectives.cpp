// CheckedCollectives: the Accelerator's gather, gather_for_metrics, reduce, broadcast and
// pad_across_processes. The ranks first exchange dtype, shape and one argument, so that ranks that
// disagree all throw the same message instead of leaving some of them waiting.
#include "runtime/checked_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>

#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

CheckedCollectives::CheckedCollectives(const Environment& env, std::shared_ptr<const GradientState> gradient_state)
    : env_(env), gradient_state_(std::move(gradient_state)) {}

namespace {
constexpr int64_t kMaxInfoDims = 8;
constexpr int64_t kInfoWidth = 5 + kMaxInfoDims;  // defined, dtype, ndim, extra, op, dims...

// The checked collectives by the number that travels, so that ranks in different ones notice.
constexpr const char* kCheckedOps[] = {"gather", "gather_for_metrics", "reduce", "broadcast", "pad_across_processes"};

int64_t op_code(const char* op) {
  for (size_t i = 0; i < std::size(kCheckedOps); ++i)
    if (std::string_view(op) == kCheckedOps[i]) return static_cast<int64_t>(i);
  throw Error(fmt::format("CheckedCollectives: '{}' is not a checked collective", op));
}
// The ledger's site: the Accelerator call and the user's line, "Accelerator::gather at train.cpp:120".
CallSite served(const char* op, const CallSite& site) { return fmt::format("Accelerator::{} at {}", op, site.str()); }
}  // namespace

std::vector<CheckedCollectives::TensorInfo> CheckedCollectives::exchange_info(const char* op, const Tensor& t, int64_t extra) {
  std::vector<int64_t> mine(kInfoWidth, 0);
  if (t.defined()) {
    mine[0] = 1;
    mine[1] = static_cast<int64_t>(t.dtype());
    mine[2] = t.dim();
    for (int64_t d = 0; d < std::min(t.dim(), kMaxInfoDims); ++d) mine[5 + d] = t.size(d);
  }
  mine[3] = extra;
  mine[4] = op_code(op);
  const int n = env_.comm()->size();
  Tensor all = empty({n, kInfoWidth}, DType::i64);
  env_.comm()->all_gather(from_vector(mine), all, site_);
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  // Ranks in different collectives met in this exchange; all of them say so in the same words.
  for (int r = 1; r < n; ++r)
    if (const int64_t other = v[static_cast<size_t>(r) * kInfoWidth + 4]; other != v[4])
      throw Error(fmt::format("Accelerator: rank 0 called {} but rank {} called {}; every rank must call the same "
                              "collectives in the same order",
                              kCheckedOps[v[4]], r, kCheckedOps[other]));
  std::vector<TensorInfo> infos(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int64_t* row = v.data() + static_cast<size_t>(r) * kInfoWidth;
    TensorInfo& info = infos[static_cast<size_t>(r)];
    info.defined = row[0] != 0;
    info.dtype = static_cast<DType>(row[1]);
    info.extra = row[3];
    if (!info.defined)
      throw Error(fmt::format("Accelerator::{}: rank {} passed an undefined tensor", op, r));
    if (row[2] > kMaxInfoDims)
      throw Error(fmt::format("Accelerator::{}: rank {} passed a tensor of {} dims; at most {} are supported", op, r,
                              row[2], kMaxInfoDims));
    info.shape.assign(row + 5, row + 5 + row[2]);
  }
  for (int r = 1; r < n; ++r)
    if (infos[static_cast<size_t>(r)].dtype != infos[0].dtype)
      throw Error(fmt::format("Accelerator::{}: rank 0 passed {} but rank {} passed {}", op,
                              dtype_name(infos[0].dtype), r, dtype_name(infos[static_cast<size_t>(r)].dtype)));
  return infos;
}

namespace {
std::string list_shapes(const std::vector<Shape>& shapes) {
  std::string out;
  for (size_t r = 0; r < shapes.size(); ++r) out += fmt::format("{}rank {} {}", r ? ", " : "", r, shape_str(shapes[r]));
  return out;
}

// How a reduction travels between the ranks: a ReduceOp's fixed value, or kUnsupported for a name
// that is none (so that every rank can fail together).
constexpr int64_t kUnsupported = -1;

std::string reduction_name(int64_t code) {
  for (ReduceOp op : kAllReduceOps)
    if (code == static_cast<int64_t>(op)) return op == ReduceOp::avg ? "mean" : reduce_op_name(op);
  return "an unsupported reduction";
}
}  // namespace

std::string CheckedCollectives::shapes_of(const std::vector<TensorInfo>& infos) {
  std::vector<Shape> shapes;
  for (const TensorInfo& info : infos) shapes.push_back(info.shape);
  return list_shapes(shapes);
}

Tensor CheckedCollectives::gather_rows(const char* op, const Tensor& tensor, int64_t padding, int stride) {
  const Tensor rows = tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  const std::vector<TensorInfo> infos = exchange_info(op, rows, padding);
  const int n = env_.comm()->size();
  std::vector<Shape> shapes;
  int64_t most = 0;
  for (const TensorInfo& info : infos) {
    shapes.push_back(info.shape);
    most = std::max(most, info.shape[0]);
  }
  for (int r = 0; r < n; ++r) {
    const Shape& s = shapes[static_cast<size_t>(r)];
    if (s.size() != shapes[0].size() || !std::equal(s.begin() + 1, s.end(), shapes[0].begin() + 1))
      throw Error(fmt::format("Accelerator::{}: the ranks' tensors differ beyond dim 0: {}", op, list_shapes(shapes)));
    if (infos[static_cast<size_t>(r)].extra > s[0])
      throw Error(fmt::format("Accelerator::{}: rank {} has {} rows but its last batch has {} padding rows; pass a "
                              "tensor whose dim 0 indexes the samples of the batch the prepared DataLoader produced "
                              "last",
                              op, r, s[0], infos[static_cast<size_t>(r)].extra));
  }
  // all_gather needs equal parts: pad every rank's rows to the largest count, then cut each part back.
  Shape part = shapes[0];
  part[0] = most;
  Tensor mine = zeros(part, rows.dtype(), rows.device());
  if (rows.size(0) > 0) nograd::copy_(nograd::narrow(mine, 0, 0, rows.size(0)), rows);
  Shape whole = part;
  whole[0] = most * n;
  Tensor all = empty(whole, rows.dtype(), rows.device());
  env_.comm_for(mine).all_gather(mine, all, site_);
  std::vector<Tensor> pieces;
  bool cut = stride > 1;
  for (int r = 0; r < n; r += stride) {
    const TensorInfo& info = infos[static_cast<size_t>(r)];
    const int64_t keep = info.shape[0] - info.extra;
    cut |= keep != most;
    pieces.push_back(nograd::narrow(all, 0, r * most, keep));
  }
  return cut ? nograd::cat(pieces, 0) : all;
}

Tensor CheckedCollectives::gather(const Tensor& tensor, const CallSite& site) {
  site_ = served("gather", site);
  if (!env_.comm()) return tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  return gather_rows("gather", tensor, 0);
}

Tensor CheckedCollectives::gather_for_metrics(const Tensor& tensor, const CallSite& site) {
  site_ = served("gather_for_metrics", site);
  // One process keeps its short last batch and never pads.
  if (!env_.comm()) return tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  return gather_rows("gather_for_metrics", tensor, gradient_state_->padding, ranks_per_data_shard_);
}

// The collectives below check their arguments after exchange_info, on every rank's values: a rank
// that finds a bad argument locally and throws would leave the others waiting in the exchange.

Tensor CheckedCollectives::reduce(const Tensor& tensor, ReduceOp op, const CallSite& site) {
  site_ = served("reduce", site);
  return reduce_as(tensor, static_cast<int64_t>(op), reduce_op_name(op));
}

Tensor CheckedCollectives::reduce(const Tensor& tensor, const std::string& reduction, const CallSite& site) {
  site_ = served("reduce", site);
  const int64_t code = reduction == "sum"    ? static_cast<int64_t>(ReduceOp::sum)
                       : reduction == "mean" ? static_cast<int64_t>(ReduceOp::avg)
                                             : kUnsupported;
  return reduce_as(tensor, code, reduction);
}

Tensor CheckedCollectives::reduce_as(const Tensor& tensor, int64_t code, const std::string& asked) {
  if (code == kUnsupported && !env_.comm())
    throw Error(fmt::format("Accelerator::reduce: reduction '{}' is not supported; expected sum or mean", asked));
  if (!env_.comm()) return tensor;
  const std::vector<TensorInfo> infos = exchange_info("reduce", tensor, code);
  for (size_t r = 0; r < infos.size(); ++r) {
    if (code == kUnsupported)
      throw Error(fmt::format("Accelerator::reduce: reduction '{}' is not supported; expected sum or mean", asked));
    if (infos[r].extra != code)
      throw Error(fmt::format("Accelerator::reduce: the ranks ask for different reductions (rank {} for {}, rank {} "
                              "for {})",
                              env_.comm()->rank(), asked, r, reduction_name(infos[r].extra)));
    if (infos[r].shape != infos[0].shape)
      throw Error(fmt::format("Accelerator::reduce: the ranks' shapes differ: {}", shapes_of(infos)));
  }
  Tensor out = nograd::clone(tensor);
  env_.comm_for(out).all_reduce(out, static_cast<ReduceOp>(code), site_);
  return out;
}

Tensor CheckedCollectives::broadcast(const Tensor& tensor, int from, const CallSite& site) {
  site_ = served("broadcast", site);
  const int n = env_.world_size();
  if (env_.comm()) {
    const std::vector<TensorInfo> infos = exchange_info("broadcast", tensor, from);
    for (size_t r = 1; r < infos.size(); ++r)
      if (infos[r].extra != infos[0].extra)
        throw Error(fmt::format("Accelerator::broadcast: the ranks broadcast from different ranks (rank 0 from {}, "
                                "rank {} from {})",
                                infos[0].extra, r, infos[r].extra));
    for (const TensorInfo& info : infos)
      if (info.shape != infos[0].shape)
        throw Error(fmt::format("Accelerator::broadcast: the ranks' shapes differ: {}", shapes_of(infos)));
  }
  if (from < 0 || from >= n)
    throw Error(fmt::format("Accelerator::broadcast: from = {} is not a rank of {}", from, n));
  if (!env_.comm()) return tensor;
  Tensor out = nograd::clone(tensor);
  env_.comm_for(out).broadcast(out, from, site_);
  return out;
}

Tensor CheckedCollectives::pad_across_processes(const Tensor& tensor, int64_t dim, double pad_index, bool pad_first,
                                                 const CallSite& site) {
  site_ = served("pad_across_processes", site);
  const char* op = "pad_across_processes";
  std::vector<TensorInfo> infos;
  if (env_.comm()) {
    infos = exchange_info(op, tensor, dim);
  } else {
    if (!tensor.defined()) throw Error("Accelerator::pad_across_processes: rank 0 passed an undefined tensor");
    infos.push_back({true, tensor.dtype(), tensor.shape(), dim});
  }
  for (size_t r = 0; r < infos.size(); ++r) {
    if (infos[r].extra != dim)
      throw Error(fmt::format("Accelerator::pad_across_processes: the ranks pad different dims (rank {} dim {}, rank {} "
                              "dim {})",
                              env_.rank(), dim, r, infos[r].extra));
    const int64_t ndim = static_cast<int64_t>(infos[r].shape.size());
    if (ndim == 0 || dim < -ndim || dim >= ndim)
      throw Error(fmt::format("Accelerator::pad_across_processes: dim {} is out of range for rank {}'s shape {}", dim,
                              r, shape_str(infos[r].shape)));
  }
  if (dim < 0) dim += tensor.dim();
  int64_t most = 0;
  for (const TensorInfo& info : infos) {
    bool same = info.shape.size() == infos[0].shape.size();
    for (size_t d = 0; same && d < info.shape.size(); ++d)
      same = static_cast<int64_t>(d) == dim || info.shape[d] == infos[0].shape[d];
    if (!same)
      throw Error(fmt::format("Accelerator::pad_across_processes: the ranks' shapes must agree except in dim {}: {}",
                              dim, shapes_of(infos)));
    most = std::max(most, info.shape[static_cast<size_t>(dim)]);
  }
  const int64_t size = tensor.size(dim);
  if (size == most) return tensor;
  Shape padded_shape = tensor.shape();
  padded_shape[static_cast<size_t>(dim)] = most;
  Tensor padded = full(padded_shape, pad_index, tensor.dtype(), tensor.device());
  nograd::copy_(nograd::narrow(padded, dim, pad_first ? most - size : 0, size), tensor);
  return padded;
}

}  // namespace accel
