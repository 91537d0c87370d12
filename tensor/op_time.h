// Where a CPU training step spends its time: wall time and calls per kind of op (matmuls, attention,
// layer_norm, gelu, cross-entropy, the optimizer's update, and the smaller kinds that make up the
// rest), for a step's per-op table (train_gpt2 --profile_ops). Off unless started; when off a scope
// costs one relaxed atomic load.
#pragma once

#include <array>
#include <cstdint>

namespace accel::op_time {

enum class Kind {
  matmul,
  attention,
  layer_norm,
  gelu,
  cross_entropy,
  optimizer,
  embedding,    // lookups and their backward (the scatter into the table's grad)
  grad_norm,    // the sum behind clip_grad_norm
  copy_fill,    // copies (contiguous, clone, dtype casts, view backward) and fills (zeros)
  elementwise,  // the other element-wise ops: residual adds, scales, grad accumulation
  reduce,       // sums over dims (bias grads)
};
inline constexpr int kKinds = 11;
const char* kind_name(Kind kind);  // "matmul", "attention", ...

// Zeroes the totals and starts counting; stop() ends it (the totals stay readable).
void start();
void stop();
bool enabled();

struct Totals {
  std::array<double, kKinds> seconds{};
  std::array<int64_t, kKinds> calls{};
};
Totals totals();

// Counts the time from construction to destruction under kind. Only the outermost scope on a thread
// counts, so an op built from others (linear's backward is two matmuls) is not counted twice. Times
// are host wall time: on a GPU they would measure launches, so only CPU ops open scopes.
class Scope {
 public:
  explicit Scope(Kind kind);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  int kind_ = -1;  // -1: not counting
  int64_t start_ns_ = 0;
};

}  // namespace accel::op_time
