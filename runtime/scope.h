// Scope: a RAII guard that runs a function when it ends, for the Accelerator's scoped calls
// (accumulate, no_sync, main_process_first). Keep it in a named variable.
#pragma once

#include <functional>
#include <utility>

namespace accel {

class [[nodiscard]] Scope {
 public:
  Scope() = default;
  explicit Scope(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {}
  Scope(Scope&& other) noexcept : on_exit_(std::exchange(other.on_exit_, nullptr)) {}
  Scope& operator=(Scope&&) = delete;
  // A failure while leaving is printed, not thrown: a destructor cannot throw.
  ~Scope();

 private:
  std::function<void()> on_exit_;
};

}  // namespace accel
