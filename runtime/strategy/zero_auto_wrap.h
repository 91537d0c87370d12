// auto_wrap_units: which modules of a model ZeRO-3 / FSDP makes units of their own (each unit's
// parameters are gathered only for its forward and backward), chosen by an AutoWrapPolicy.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"
#include "runtime/sharding_plugins.h"

namespace accel {

struct WrappedUnit {
  std::string name;           // the module's name in the model ("" for the root)
  nn::Module* module = nullptr;
  nn::StateDict params;       // the parameters this unit holds, by their names in the model
};

// Bottom-up, as PyTorch's policies: a module becomes a unit when its type_name() is one of
// policy.module_types, or when the parameters of its subtree that no unit below it took number at
// least policy.min_num_params; with both empty, every module that owns parameters directly. The
// root is never wrapped by the policy: it becomes the last unit with what is left, if anything.
// Units come in the order their modules start their forward (depth first). A tied parameter belongs
// to the first unit that holds it; one that a module's own forward reads (nn::ReadsDescendantParameters,
// a tied head) goes to no unit below that module. Throws when a module type of the policy matches no
// module.
std::vector<WrappedUnit> auto_wrap_units(nn::Module& model, const AutoWrapPolicy& policy);

}  // namespace accel
