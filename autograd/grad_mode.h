// Grad mode: whether ops record the graph on this thread. NoGradGuard turns it off for a scope.
#pragma once

namespace accel {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Ops run inside this scope record nothing: for evaluation and for optimizer updates.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace accel
