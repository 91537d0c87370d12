// Where a CPU training step spends its time: wall time and calls per kind of op (matmuls, attention,
// layer_norm, gelu, cross-entropy, the optimizer's update), for a step's per-op table (train_gpt2
// --profile_ops). Off unless started; when off a scope costs one relaxed atomic load.
#pragma once

#include <array>
#include <cstdint>

namespace accel::op_time {

enum class Kind { matmul, attention, layer_norm, gelu, cross_entropy, optimizer };
inline constexpr int kKinds = 6;
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
