// Must not compile: an optimizer by reference. Expected: "pass an optimizer or an LRScheduler as a std::shared_ptr".
#include "optim/sgd.h"
#include "runtime/accelerator.h"

void prepare_plain_optimizer(accel::Accelerator& accelerator, accel::optim::SGD& optimizer) { accelerator.prepare(optimizer); }
