// Materialising a module: each distinct meta storage once, in place.
#include "nn/materialize.h"

#include "tensor/meta_tensor.h"

namespace accel::nn {

namespace {

void materialize_all(const StateDict& entries) {
  // A tied weight appears twice but is one storage: the first materialises it, the second sees data.
  for (const auto& [name, t] : entries) materialize_in_place(t, name);
}

}  // namespace

std::string first_meta_tensor(const Module& module) {
  for (const auto& [name, t] : module.state_dict())
    if (t.is_meta()) return name;
  return "";
}

void materialize(Module& module) { materialize_all(module.state_dict()); }

void materialize_buffers(Module& module) { materialize_all(module.named_buffers()); }

}  // namespace accel::nn
