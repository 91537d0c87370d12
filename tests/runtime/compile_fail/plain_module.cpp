// Must not compile: a model passed by value. Expected: "pass a model as a std::shared_ptr".
#include "runtime/accelerator.h"
#include "nn/linear.h"

void prepare_plain_module(accel::Accelerator& accelerator, accel::nn::Linear& model) { auto net = accelerator.prepare(model); }
