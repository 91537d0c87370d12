// The deterministic-mode switch: an atomic flag, so threads that run ops read a whole value.
#include "tensor/deterministic.h"

#include <atomic>

namespace accel {

namespace {
std::atomic<bool> deterministic{false};
}  // namespace

bool deterministic_mode() { return deterministic.load(std::memory_order_relaxed); }

void set_deterministic_mode(bool on) { deterministic.store(on, std::memory_order_relaxed); }

DeterministicGuard::DeterministicGuard(bool on) : previous_(deterministic_mode()) { set_deterministic_mode(on); }

DeterministicGuard::~DeterministicGuard() { set_deterministic_mode(previous_); }

}  // namespace accel
