// Grad mode is per thread, so a communication thread never records into a training step's graph.
#include "autograd/grad_mode.h"

namespace accel {

namespace {
thread_local bool grad_enabled = true;
}

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace accel
