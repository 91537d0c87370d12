// Reducer: bucket assignment, the grad-ready hook that fills buckets and launches them in order, and
// the end of backward (launch the rest, wait, write the averages back).
#include "runtime/strategy/reducer.h"

#include <fmt/format.h>

#include <map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "runtime/strategy/grad_average.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

std::shared_ptr<Reducer> Reducer::attach(const nn::StateDict& named_parameters, std::shared_ptr<Communicator> comm,
                                         const ReducerOptions& options) {
  std::shared_ptr<Reducer> reducer(new Reducer(named_parameters, std::move(comm), options));
  reducer->install_hooks();  // the hooks need a weak_ptr, which exists only once a shared_ptr owns it
  return reducer;
}

Reducer::Reducer(const nn::StateDict& named_parameters, std::shared_ptr<Communicator> comm,
                 const ReducerOptions& options)
    : comm_(std::move(comm)), comm_dtype_(options.comm_dtype) {
  if (!comm_) throw Error("Reducer: got a null communicator");
  if (!is_floating(comm_dtype_))
    throw Error(fmt::format("Reducer: comm_dtype must be floating, got {}", dtype_name(comm_dtype_)));
  if (options.bucket_cap_bytes <= 0 || options.first_bucket_cap_bytes <= 0)
    throw Error(fmt::format("Reducer: bucket caps must be positive, got {} bytes and first {} bytes",
                            options.bucket_cap_bytes, options.first_bucket_cap_bytes));
  // A parameter registered twice (tied weights) is one tensor with one grad: reduce it once.
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [name, p] : named_parameters) {
    if (!p.defined() || !p.requires_grad() || !p.is_leaf())
      throw Error(fmt::format("Reducer: parameter '{}' must be a leaf that requires grad", name));
    if (!is_floating(p.dtype()))
      throw Error(fmt::format("Reducer: parameter '{}' has dtype {}; expected a floating dtype", name,
                              dtype_name(p.dtype())));
    if (!seen.insert(p.impl()).second) continue;
    params_.push_back(p);
    names_.push_back(name);
  }
  if (params_.empty()) throw Error("Reducer: the model has no parameters to reduce");
  build_buckets(options);
}

void Reducer::build_buckets(const ReducerOptions& options) {
  // Parameters in reverse order, one open bucket per dtype and device (a flat buffer has one of each).
  std::map<std::pair<DType, std::string>, size_t> open;
  std::map<std::pair<DType, std::string>, int> closed_count;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const auto key = std::make_pair(p.dtype(), p.device().str());
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    auto it = open.find(key);
    if (it != open.end()) {
      Bucket& b = buckets_[it->second];
      if (b.bytes + bytes > b.cap_bytes) {
        ++closed_count[key];
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      Bucket b;
      b.dtype = p.dtype();
      b.cap_bytes = closed_count[key] == 0 ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
      buckets_.push_back(b);
      it = open.emplace(key, buckets_.size() - 1).first;
    }
    buckets_[it->second].params.push_back(k);
    buckets_[it->second].bytes += bytes;
  }
  // Buckets were created in the order of their first parameter in reverse order, which is the order
  // backward fills them; they launch in this order on every rank.
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  ready_.assign(params_.size(), false);
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const Bucket& b = buckets_[bi];
    int64_t grads = 0;
    for (size_t k : b.params) grads += params_[k].numel();
    BucketState s;
    s.buffer = zeros({grads + static_cast<int64_t>(b.params.size())}, b.dtype, params_[b.params[0]].device());
    int64_t offset = 0;
    for (size_t j = 0; j < b.params.size(); ++j) {
      const Tensor& p = params_[b.params[j]];
      s.slots.push_back(nograd::view(nograd::narrow(s.buffer, 0, offset, p.numel()), p.shape()));
      s.flags.push_back(nograd::narrow(s.buffer, 0, grads + static_cast<int64_t>(j), 1));
      offset += p.numel();
      bucket_of_[b.params[j]] = bi;
      slot_of_[b.params[j]] = j;
    }
    state_.push_back(std::move(s));
  }
}

Reducer::~Reducer() {
  for (HookHandle& hook : hooks_) hook.remove();
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> self = weak_from_this();
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].add_grad_ready_hook([self, k](Tensor&) {
      if (std::shared_ptr<Reducer> reducer = self.lock()) reducer->on_grad_ready(k);
    }));
  }
}

void Reducer::prepare_for_backward(bool sync) {
  if (in_backward_) disarm();  // the previous backward never reached finalize (it threw)
  NoGradGuard no_grad;
  events_.clear();
  sync_ = sync;
  in_backward_ = true;
  next_launch_ = 0;
  ready_.assign(params_.size(), false);
  lent_.assign(params_.size(), false);
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    BucketState& s = state_[bi];
    // The last launch of this buffer must be over before anything writes into it again.
    if (s.work.valid()) s.work.wait();
    s.work = Work();
    s.wire = Tensor();
    s.pending = static_cast<int64_t>(buckets_[bi].params.size());
  }
  // A parameter without a grad gets its zeroed bucket slot as its grad, so the engine accumulates
  // straight into the bucket: no new grad buffer each step, and nothing for the hook to copy.
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k];
    const Tensor& slot = state_[bucket_of_[k]].slots[slot_of_[k]];
    if (p.dtype() != slot.dtype() || p.device() != slot.device())
      throw Error(fmt::format("Reducer: parameter '{}' is now {} on {}, but its bucket was built for {} on {}; "
                              "move or cast the model before prepare()",
                              names_[k], dtype_name(p.dtype()), p.device().str(), dtype_name(slot.dtype()),
                              slot.device().str()));
    if (p.grad().defined()) continue;
    nograd::zero_(slot);
    p.set_grad(slot);
    lent_[k] = true;
  }
}

void Reducer::on_grad_ready(size_t k) {
  if (!in_backward_) return;
  if (ready_[k])
    throw Error(fmt::format("Reducer: the grad of '{}' became ready twice in one backward; each parameter may "
                            "reach the loss through one graph only",
                            names_[k]));
  ready_[k] = true;
  if (!sync_) return;
  NoGradGuard no_grad;
  BucketState& s = state_[bucket_of_[k]];
  const size_t j = slot_of_[k];
  const Tensor grad = params_[k].grad();
  if (grad.data_ptr() != s.slots[j].data_ptr()) nograd::copy_(s.slots[j], grad);
  nograd::fill_(s.flags[j], 1.0);
  events_.push_back({ReducerEvent::Kind::grad_ready, static_cast<int64_t>(k)});
  if (--s.pending == 0) launch_ready();
}

void Reducer::launch_ready() {
  // Launching bucket i only after 0..i-1 keeps the all-reduces in the same order on every rank,
  // whatever order this rank's backward happened to finish them in.
  while (next_launch_ < buckets_.size() && state_[next_launch_].pending == 0) {
    BucketState& s = state_[next_launch_];
    NoGradGuard no_grad;
    const bool narrow = s.buffer.dtype() == DType::f32 && comm_dtype_ != DType::f32;
    s.wire = narrow ? nograd::to_dtype(s.buffer, comm_dtype_) : Tensor();
    const Tensor& wire = s.wire.defined() ? s.wire : s.buffer;
    const ReduceOp op = predivide_for_average(wire, comm_->size());
    s.work = comm_->all_reduce_async(wire, op, CallSite::gradient_sync(fmt::format("reducer bucket {}", next_launch_)));
    events_.push_back({ReducerEvent::Kind::bucket_launched, static_cast<int64_t>(next_launch_)});
    ++next_launch_;
  }
}

void Reducer::return_unused_slots() {
  // A lent slot that this backward never reached was no grad at all: the parameter gets none back.
  for (size_t k = 0; k < params_.size(); ++k)
    if (lent_[k] && !ready_[k]) params_[k].set_grad(Tensor());
}

void Reducer::finalize() {
  if (!in_backward_) throw Error("Reducer::finalize: no backward was prepared");
  in_backward_ = false;
  return_unused_slots();
  if (!sync_) return;
  events_.push_back({ReducerEvent::Kind::backward_done, -1});
  NoGradGuard no_grad;
  // Parameters this backward did not reach take part with the grad they hold from earlier
  // micro-batches of an accumulation window, or else as zeros with a zero used-flag.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    BucketState& s = state_[bucket_of_[k]];
    const Tensor& slot = s.slots[slot_of_[k]];
    const Tensor grad = params_[k].grad();
    if (grad.defined()) {
      if (grad.data_ptr() != slot.data_ptr()) nograd::copy_(slot, grad);
      nograd::fill_(s.flags[slot_of_[k]], 1.0);
    } else {
      nograd::zero_(slot);
      nograd::zero_(s.flags[slot_of_[k]]);
    }
    --s.pending;
  }
  launch_ready();
  // Every bucket's used-flags are read in one transfer after all waits: on a GPU (nccl) wait() only
  // orders the compute stream, and this one read is the only time backward waits on the host.
  std::vector<Tensor> flags;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    BucketState& s = state_[bi];
    s.work.wait();
    s.work = Work();
    if (s.wire.defined()) {
      nograd::copy_(s.buffer, s.wire);  // widened back into the buffer the grads are views of
      s.wire = Tensor();
    }
    events_.push_back({ReducerEvent::Kind::bucket_finished, static_cast<int64_t>(bi)});
    const int64_t count = static_cast<int64_t>(buckets_[bi].params.size());
    flags.push_back(nograd::to_dtype(nograd::narrow(s.buffer, 0, s.buffer.numel() - count, count), DType::f64));
  }
  if (flags.empty()) return;
  // The flags were averaged too: non-zero where at least one rank had the grad.
  const std::vector<double> used = nograd::cat(flags, 0).to_vector<double>();
  size_t at = 0;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const Bucket& b = buckets_[bi];
    // The grads are views of the bucket (c10d's gradient_as_bucket_view), so nothing is copied back.
    for (size_t j = 0; j < b.params.size(); ++j, ++at)
      if (used[at] != 0.0) params_[b.params[j]].set_grad(state_[bi].slots[j]);
  }
}

void Reducer::disarm() {
  // Launched buckets keep their Work: the next prepare_for_backward waits for them before anything
  // writes into those buffers again.
  if (in_backward_) return_unused_slots();
  in_backward_ = false;
}

std::string Reducer::describe(const ReducerEvent& e) const {
  switch (e.kind) {
    case ReducerEvent::Kind::grad_ready:
      return fmt::format("grad ready {}", names_.at(static_cast<size_t>(e.index)));
    case ReducerEvent::Kind::bucket_launched: return fmt::format("bucket {} launched", e.index);
    case ReducerEvent::Kind::backward_done: return "backward done";
    case ReducerEvent::Kind::bucket_finished: return fmt::format("bucket {} finished", e.index);
  }
  return "unknown event";
}

}  // namespace accel
