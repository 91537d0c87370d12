// DeferredInit: the per-thread flag the creation functions read.
#include "tensor/deferred_init.h"

namespace accel {

namespace {
thread_local bool deferred_init_enabled = false;
}

DeferredInit::DeferredInit(bool enabled) : previous_(deferred_init_enabled) { deferred_init_enabled = enabled; }

DeferredInit::~DeferredInit() { deferred_init_enabled = previous_; }

bool DeferredInit::is_enabled() { return deferred_init_enabled; }

}  // namespace accel
