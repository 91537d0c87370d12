// The op-time totals: relaxed atomics, since ops may run on more than one thread (a ZeRO or
// checkpoint thread copies), and a per-thread depth so that nested scopes count once.
#include "tensor/op_time.h"

#include <atomic>
#include <chrono>

namespace accel::op_time {

namespace {

std::atomic<bool> counting{false};
std::array<std::atomic<int64_t>, kKinds> total_ns{};
std::array<std::atomic<int64_t>, kKinds> total_calls{};
thread_local int depth = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* kind_name(Kind kind) {
  static constexpr const char* kNames[kKinds] = {"matmul",    "attention", "layer_norm", "gelu",
                                                 "cross_entropy", "optimizer", "embedding", "grad_norm",
                                                 "copy_fill", "elementwise", "reduce"};
  return kNames[static_cast<int>(kind)];
}

void start() {
  for (int i = 0; i < kKinds; ++i) {
    total_ns[i].store(0, std::memory_order_relaxed);
    total_calls[i].store(0, std::memory_order_relaxed);
  }
  counting.store(true, std::memory_order_release);
}

void stop() { counting.store(false, std::memory_order_release); }
bool enabled() { return counting.load(std::memory_order_relaxed); }

Totals totals() {
  Totals t;
  for (int i = 0; i < kKinds; ++i) {
    t.seconds[i] = static_cast<double>(total_ns[i].load(std::memory_order_relaxed)) * 1e-9;
    t.calls[i] = total_calls[i].load(std::memory_order_relaxed);
  }
  return t;
}

Scope::Scope(Kind kind) {
  if (depth++ > 0 || !enabled()) return;
  kind_ = static_cast<int>(kind);
  start_ns_ = now_ns();
}

Scope::~Scope() {
  --depth;
  if (kind_ < 0) return;
  total_ns[kind_].fetch_add(now_ns() - start_ns_, std::memory_order_relaxed);
  total_calls[kind_].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace accel::op_time
