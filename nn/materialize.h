// Materialising a module built under DeferredInit: its meta parameters and buffers get their data,
// whole, with the values their recorded initialisers give (the values a normal build gives).
#pragma once

#include <string>

#include "nn/module.h"

namespace accel::nn {

// The name of the module's first meta parameter or buffer, or "" when it has none.
std::string first_meta_tensor(const Module& module);
// Every meta parameter and buffer of module is given its data in place (its identity, and every
// handle to it, such as an optimizer's, are kept). A tensor that no initialiser wrote in full is an
// error naming it. Without DeferredInit a module has nothing to materialise and is left alone.
void materialize(Module& module);
// The same for the buffers only (a strategy that shards the parameters materialises their shards).
void materialize_buffers(Module& module);

}  // namespace accel::nn
