// Loading a full state into a model built under DeferredInit, before prepare: each meta tensor the
// state fits gets a last init step that reads its values from the state, so that prepare
// materialises them from it. A strategy that shards the model then reads only each rank's slices,
// and no rank draws the random values the state overwrites.
#pragma once

#include <memory>
#include <string>

#include "nn/module.h"
#include "runtime/state_reader.h"

namespace accel {

// Whether any of model's parameters or buffers is a meta tensor (built under DeferredInit and not
// materialised yet).
bool has_meta_tensors(const nn::Module& model);

// Checks state's names and shapes against model as load_state_dict does (strict: any missing,
// unexpected or mis-shaped key throws, naming them, and nothing changes), then makes each meta
// tensor that fits read its values from state when it is materialised, and copies into the others.
// state is kept alive by the recipes until then; origin names it in messages (the file).
nn::LoadResult load_into_deferred(nn::Module& model, std::shared_ptr<const StateReader> state,
                                  const std::string& origin, bool strict);

}  // namespace accel
