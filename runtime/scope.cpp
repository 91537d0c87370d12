// Scope: the destructor that runs the exit function.
#include "runtime/scope.h"

#include <exception>
#include <iostream>

namespace accel {

Scope::~Scope() {
  if (!on_exit_) return;
  try {
    on_exit_();
  } catch (const std::exception& e) {
    // A failing barrier here means the job is already broken.
    std::cerr << "accel: leaving a scope failed: " << e.what() << std::endl;
  }
}

}  // namespace accel
