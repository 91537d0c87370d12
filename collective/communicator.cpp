// The argument checks of Communicator's public operations (backends only see calls that passed them),
// their ledger records, and the debug mode's check across ranks.
#include "collective/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "collective/timeline.h"
#include "tensor/creation.h"

namespace accel {

namespace {

std::string describe(const Tensor& t) { return fmt::format("{} {}", dtype_name(t.dtype()), shape_str(t.shape())); }

void check_tensor(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("{}: {} is undefined", op, name));
  // An empty tensor has no layout to get wrong, whatever its strides say.
  if (t.numel() != 0 && !t.is_contiguous())
    throw Error(fmt::format("{}: {} is not contiguous (shape {}, strides {}); pass nograd::contiguous({})", op, name,
                            shape_str(t.shape()), shape_str(t.strides()), name));
}

void check_same_dtype(const char* op, const Tensor& in, const Tensor& out) {
  if (in.dtype() != out.dtype())
    throw Error(fmt::format("{}: out is {} but in is {}; expected the same dtype", op, dtype_name(out.dtype()),
                            dtype_name(in.dtype())));
}

void check_op(const char* op, DType dtype, ReduceOp reduce) {
  if (is_float8(dtype))
    throw Error(fmt::format("{}: cannot {}-reduce {} tensors (f8 only stores: reduce in f32 and cast)", op,
                            reduce_op_name(reduce), dtype_name(dtype)));
  if (reduce == ReduceOp::avg && dtype == DType::boolean)
    throw Error(fmt::format("{}: avg is not defined for bool (max is logical or, min is logical and)", op));
}

void check_rank(const char* op, const char* what, int value, int size) {
  if (value < 0 || value >= size)
    throw Error(fmt::format("{}: {} {} out of range for {} ranks", op, what, value, size));
}

void check_tag(const char* op, int tag) {
  if (tag < 0 || tag > kMaxTag) throw Error(fmt::format("{}: tag {} out of range [0, {}]", op, tag, kMaxTag));
}

const char* begin_of(const Tensor& t) { return static_cast<const char*>(t.data_ptr()); }

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  return begin_of(a) < begin_of(b) + b.nbytes() && begin_of(b) < begin_of(a) + a.nbytes();
}

// True when part is slot `index` of whole (whole holds size equal slots of part's size).
bool is_slot(const Tensor& part, const Tensor& whole, int index) {
  return part.storage() == whole.storage() &&
         begin_of(part) == begin_of(whole) + static_cast<size_t>(index) * part.nbytes();
}

// The shapes a tensor made of n parts of shape `part` may have: [n * d0, d1, ...] and [n, d0, d1, ...].
std::vector<Shape> gathered_shapes(const Shape& part, int n) {
  std::vector<Shape> shapes;
  if (!part.empty()) {
    Shape concatenated = part;
    concatenated[0] *= n;
    shapes.push_back(concatenated);
  }
  Shape stacked = part;
  stacked.insert(stacked.begin(), n);
  shapes.push_back(stacked);
  return shapes;
}

// Checks that `whole_name` (whole) is n parts of `part_name` (part) under the shape rules.
void check_gathered_shape(const char* op, const char* whole_name, const Tensor& whole, const char* part_name,
                          const Tensor& part, int n) {
  const std::vector<Shape> allowed = gathered_shapes(part.shape(), n);
  for (const Shape& shape : allowed)
    if (shape == whole.shape()) return;
  std::string expected = shape_str(allowed[0]);
  if (allowed.size() > 1) expected += " or " + shape_str(allowed[1]);
  throw Error(fmt::format("{}: {} has shape {}, expected {} for {} ranks of {} {}", op, whole_name,
                          shape_str(whole.shape()), expected, n, part_name, shape_str(part.shape())));
}

// The ops the debug check exchanges, by their index here.
constexpr const char* kCheckedOps[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "barrier"};

int64_t op_code(const char* op) {
  for (size_t i = 0; i < std::size(kCheckedOps); ++i)
    if (std::string_view(kCheckedOps[i]) == op) return static_cast<int64_t>(i);
  return -1;
}

std::string describe_call(const int64_t* d) {
  const int64_t code = d[0];
  const char* op = code >= 0 && code < static_cast<int64_t>(std::size(kCheckedOps)) ? kCheckedOps[code] : "?";
  if (std::string_view(op) == "barrier") return "barrier";
  std::string text = fmt::format("{} {} x {}", op, dtype_name(static_cast<DType>(d[1])), d[2]);
  if (d[3] >= 0) text += fmt::format(" root {}", d[3]);
  return text;
}

}  // namespace

template <class Start>
Work Communicator::recorded(const char* op, const Tensor& tensor, int root, const CallSite& site, Start&& start) {
  if (collective_checks()) check_across_ranks(op, tensor, root, site);
  const DType dtype = tensor.defined() ? tensor.dtype() : DType::f32;
  const int64_t count = tensor.defined() ? tensor.numel() : 0;
  const uint64_t seq = ledger_->enter(op, dtype, count, root, site);
  const size_t slice =
      timeline::enabled()
          ? timeline::collective_begin({op, name(), seq, dtype_name(dtype), count, site.str(), site.synchronises_gradients})
          : timeline::kNoSlice;
  Work work;
  try {
    work = start();
  } catch (...) {
    ledger_->finish(seq, true);
    timeline::collective_end(slice, true);
    throw;
  }
  work.when_finished([ledger = ledger_, seq, slice](bool failed) {
    ledger->finish(seq, failed);
    timeline::collective_end(slice, failed);
  });
  return work;
}

void Communicator::check_across_ranks(const char* op, const Tensor& tensor, int root, const CallSite& site) {
  const Device device = tensor.defined() ? tensor.device() : Device::cpu();
  if (device.is_cpu() && std::string_view(backend()) == "nccl") return;  // nccl moves device memory only
  const int64_t mine[4] = {op_code(op), tensor.defined() ? static_cast<int64_t>(tensor.dtype()) : -1,
                           tensor.defined() ? tensor.numel() : 0, root};
  Tensor all = empty({size(), 4}, DType::i64);
  start_all_gather(from_vector(std::vector<int64_t>(mine, mine + 4)), all, false).wait();
  const std::vector<int64_t> d = all.to_vector<int64_t>();
  bool same = true;
  for (int r = 1; r < size(); ++r) same = same && std::equal(d.begin(), d.begin() + 4, d.begin() + 4 * r);
  if (same) return;
  std::string each;
  for (int r = 0; r < size(); ++r) each += fmt::format("{}rank {} {}", r ? ", " : "", r, describe_call(&d[4 * r]));
  throw Error(fmt::format("{} at {} on communicator {}: the ranks called different collectives ({}); every rank "
                          "must make the same calls in the same order (found by the debug mode's check)",
                          op, site.str(), name(), each));
}

std::string Communicator::child_name(const char* how) { return fmt::format("{}/{}{}", name(), how, ++children_); }

std::unique_ptr<Communicator> Communicator::dup() {
  std::unique_ptr<Communicator> child = create_dup();
  child->set_name(child_name("dup"));
  return child;
}

Work Communicator::all_reduce_async(const Tensor& tensor, ReduceOp op, CallSite site) {
  return all_reduce_async(tensor, tensor, op, std::move(site));
}

Work Communicator::all_reduce_async(const Tensor& in, const Tensor& out, ReduceOp op, CallSite site) {
  check_tensor("all_reduce", "in", in);
  check_tensor("all_reduce", "out", out);
  if (in.dtype() != out.dtype() || in.shape() != out.shape())
    throw Error(fmt::format("all_reduce: out is {} but in is {}; expected the same dtype and shape", describe(out),
                            describe(in)));
  check_op("all_reduce", in.dtype(), op);
  const bool in_place = in.is_same(out) || (in.storage() == out.storage() && in.data_ptr() == out.data_ptr());
  if (!in_place && overlaps(in, out))
    throw Error("all_reduce: in and out overlap but are not the same memory");
  return recorded("all_reduce", in, -1, site, [&] { return start_all_reduce(in, out, op, in_place); });
}

Work Communicator::broadcast_async(const Tensor& tensor, int root, CallSite site) {
  check_tensor("broadcast", "tensor", tensor);
  check_rank("broadcast", "root", root, size());
  return recorded("broadcast", tensor, root, site, [&] { return start_broadcast(tensor, root); });
}

Work Communicator::all_gather_async(const Tensor& in, const Tensor& out, CallSite site) {
  check_tensor("all_gather", "in", in);
  check_tensor("all_gather", "out", out);
  check_same_dtype("all_gather", in, out);
  check_gathered_shape("all_gather", "out", out, "in", in, size());
  const bool in_place = is_slot(in, out, rank());
  if (!in_place && overlaps(in, out))
    throw Error(fmt::format("all_gather: in overlaps out but is not out's slot for rank {}", rank()));
  return recorded("all_gather", in, -1, site, [&] { return start_all_gather(in, out, in_place); });
}

Work Communicator::reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op, CallSite site) {
  check_tensor("reduce_scatter", "in", in);
  check_tensor("reduce_scatter", "out", out);
  check_same_dtype("reduce_scatter", in, out);
  check_gathered_shape("reduce_scatter", "in", in, "out", out, size());
  check_op("reduce_scatter", in.dtype(), op);
  const bool in_place = is_slot(out, in, rank());
  if (!in_place && overlaps(in, out))
    throw Error(fmt::format("reduce_scatter: out overlaps in but is not in's slot for rank {}", rank()));
  return recorded("reduce_scatter", out, -1, site, [&] { return start_reduce_scatter(in, out, op, in_place); });
}

Work Communicator::gather_async(const Tensor& in, const Tensor& out, int root, CallSite site) {
  check_tensor("gather", "in", in);
  check_rank("gather", "root", root, size());
  if (rank() != root) return recorded("gather", in, root, site, [&] { return start_gather(in, Tensor(), root); });
  check_tensor("gather", "out", out);
  check_same_dtype("gather", in, out);
  check_gathered_shape("gather", "out", out, "in", in, size());
  if (overlaps(in, out)) throw Error("gather: in and out overlap");
  return recorded("gather", in, root, site, [&] { return start_gather(in, out, root); });
}

Work Communicator::barrier_async(CallSite site) {
  return recorded("barrier", Tensor(), -1, site, [&] { return start_barrier(); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  // The libraries take other negative colors differently (MPI fails, NCCL builds a group), so only
  // the one meaning every backend shares is allowed.
  if (color < 0 && color != kNoColor)
    throw Error(fmt::format("split: color {} is negative; expected a color >= 0, or kNoColor ({}) to join no group",
                            color, kNoColor));
  std::unique_ptr<Communicator> child = create_split(color, key);
  if (child) child->set_name(fmt::format("{}.{}", child_name("split"), color));
  else ++children_;  // the ranks of a group count this split too, so later names agree
  return child;
}

Work Communicator::send_async(const Tensor& tensor, int dst, int tag) {
  check_tensor("send", "tensor", tensor);
  check_rank("send", "dst", dst, size());
  check_tag("send", tag);
  return start_send(tensor, dst, tag);
}

Work Communicator::recv_async(const Tensor& tensor, int src, int tag) {
  check_tensor("recv", "tensor", tensor);
  check_rank("recv", "src", src, size());
  check_tag("recv", tag);
  return start_recv(tensor, src, tag);
}

}  // namespace accel
