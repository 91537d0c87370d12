// Autocast: the thread-local scope state, the differentiable casts the ops call, and WeightCopies.
#include "autograd/autocast.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/nograd/copy.h"

namespace accel {

namespace {

struct AutocastState {
  bool enabled = false;
  DType compute = DType::f32;
  WeightCopies* copies = nullptr;
};

// Per thread, like grad mode: a data-loading or communication thread never sees a training thread's scope.
thread_local AutocastState state;

}  // namespace

void WeightCopies::add(const Tensor& master) {
  if (!master.defined() || master.dtype() != DType::f32) return;
  entries_.try_emplace(master.impl(), Entry{master, Tensor(), 0});
}

Tensor WeightCopies::copy_of(const Tensor& master) {
  auto it = entries_.find(master.impl());
  if (it == entries_.end()) return Tensor();
  Entry& e = it->second;
  if (e.generation != generation_ || !e.copy.defined() || e.copy.shape() != master.shape() ||
      e.copy.device() != master.device()) {
    // A new tensor, not a copy_ into the old one: a graph that saved the old copy keeps its values.
    NoGradGuard no_grad;
    e.copy = nograd::to_dtype(master, dtype_);
    e.generation = generation_;
    ++roundings_;
  }
  return e.copy;
}

AutocastGuard::AutocastGuard(const PrecisionPolicy& policy, WeightCopies* copies)
    : prev_enabled_(state.enabled), prev_compute_(state.compute), prev_copies_(state.copies) {
  policy.validate();
  state.enabled = policy.is_mixed();
  state.compute = policy.compute;
  state.copies = copies && copies->dtype() == policy.compute ? copies : nullptr;
}

AutocastGuard::~AutocastGuard() {
  state.enabled = prev_enabled_;
  state.compute = prev_compute_;
  state.copies = prev_copies_;
}

namespace autocast {

bool enabled() { return state.enabled; }

DType compute_dtype() { return state.enabled ? state.compute : DType::f32; }

Tensor to_compute(const Tensor& t) {
  if (!state.enabled || !t.defined() || !is_floating(t.dtype()) || t.dtype() == state.compute) return t;
  if (state.copies) {
    if (const Tensor copy = state.copies->copy_of(t); copy.defined()) {
      // A fresh handle to the copy, so the node recorded on it never sits on the cached tensor.
      Tensor out = detach(copy);
      autograd::record("ToDTypeBackward", {t}, {out},
                       [from = t.dtype()](const std::vector<Tensor>& g) -> std::vector<Tensor> {
                         return {nograd::to_dtype(g[0], from)};
                       });
      return out;
    }
  }
  return to(t, state.compute);
}

Tensor to_reduction(const Tensor& t) {
  if (!state.enabled || !t.defined() || !is_low_precision(t.dtype())) return t;
  return to(t, DType::f32);
}

void promote(Tensor& a, Tensor& b) {
  if (!state.enabled || !a.defined() || !b.defined() || a.dtype() == b.dtype()) return;
  if (!is_floating(a.dtype()) || !is_floating(b.dtype())) return;
  // The wider of two floating dtypes; f16 with bf16 (the same width, neither holds the other) meet in f32.
  DType wider = dtype_size(a.dtype()) >= dtype_size(b.dtype()) ? a.dtype() : b.dtype();
  if (is_low_precision(a.dtype()) && is_low_precision(b.dtype())) wider = DType::f32;
  if (a.dtype() != wider) a = to(a, wider);
  if (b.dtype() != wider) b = to(b, wider);
}

}  // namespace autocast

}  // namespace accel
