// Autocast: a scope (an RAII guard over thread-local state) inside which matmul, linear and attention
// run in the precision policy's compute dtype and precision-sensitive ops (softmax, layer_norm,
// cross_entropy, sums and means) in f32, with differentiable casts so grads reach f32 leaves as f32.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "autograd/precision_policy.h"
#include "tensor/tensor.h"

namespace accel {

// Low-precision copies of f32 master weights. Under autocast, an op that wants a registered master in
// the compute dtype gets its copy, rounded once per optimizer step instead of at every use; grads
// still flow to the master (as f32). mark_stale() says the masters changed (after a step, a load):
// each copy is re-rounded on its next use. Owned by whoever owns the optimizer (the Accelerator).
class WeightCopies {
 public:
  explicit WeightCopies(DType dtype) : dtype_(dtype) {}
  DType dtype() const { return dtype_; }
  // Registers a master; only f32 tensors are, others are ignored.
  void add(const Tensor& master);
  // The up-to-date copy of master, or an undefined tensor when master is not registered.
  Tensor copy_of(const Tensor& master);
  void mark_stale() { ++generation_; }
  // How many times a copy was (re-)rounded, for tests and logs.
  int64_t roundings() const { return roundings_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Tensor master;
    Tensor copy;
    uint64_t generation = 0;
  };
  DType dtype_;
  std::unordered_map<const TensorImpl*, Entry> entries_;
  uint64_t generation_ = 1;
  int64_t roundings_ = 0;
};

// Turns autocast on for the current thread with policy's compute dtype (off when the policy is not
// mixed), restoring the previous state when it ends. copies may be null.
class [[nodiscard]] AutocastGuard {
 public:
  explicit AutocastGuard(const PrecisionPolicy& policy, WeightCopies* copies = nullptr);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_enabled_;
  DType prev_compute_;
  WeightCopies* prev_copies_;
};

namespace autocast {

// Whether the current thread is inside an autocast scope with a mixed policy.
bool enabled();
// The compute dtype of that scope (f32 outside).
DType compute_dtype();
// For the ops that run in the compute dtype: a floating t of another dtype cast to it (a registered
// master through its WeightCopies copy), differentiably; otherwise t itself. Outside autocast, t.
Tensor to_compute(const Tensor& t);
// For precision-sensitive ops: a half t cast to f32; otherwise t itself. Outside autocast, t.
Tensor to_reduction(const Tensor& t);
// For binary elementwise ops: when a and b are floating of different dtypes, the narrower is cast to
// the wider (f16 with bf16 gives f32), as PyTorch promotes. Outside autocast, nothing changes.
void promote(Tensor& a, Tensor& b);

}  // namespace autocast

}  // namespace accel
