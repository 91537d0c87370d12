// Deterministic mode: the process-wide switch that makes every op's result independent of the
// OpenMP thread count (docs/numerics.md says what it guarantees and what it costs).
#pragma once

namespace accel {

// The one piece of process-wide state below the runtime, by necessity: the ops have no context
// object to carry it. It is off by default; the Accelerator sets it from its `deterministic` setting
// (code, then ACCEL_DETERMINISTIC, then the default) when it is built, and a program without an
// Accelerator may set it itself. The CPU ops read it on each call: with it on, matmul and linear
// compute the output in fixed tiles, each on one thread with the whole inner dim, and the
// elementwise loops split their work into fixed blocks, so no result depends on how many threads run.
// On CUDA it restricts cuBLASLt to algorithms that do not split the inner dim.
bool deterministic_mode();
void set_deterministic_mode(bool on);

// Sets the mode for a scope and restores the previous value when it ends (tests, benchmarks).
class DeterministicGuard {
 public:
  explicit DeterministicGuard(bool on = true);
  ~DeterministicGuard();
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace accel
