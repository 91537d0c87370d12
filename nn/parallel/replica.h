// Replicas: copies of the modules that a tensor-parallel layer keeps whole on every rank (LayerNorm,
// the dropouts on replicated tensors), taken from the full layer it is built from.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/layer_norm.h"

namespace accel::nn::parallel {

// A LayerNorm with full's eps, and copies of its weight and bias (dtype and device included).
std::shared_ptr<LayerNorm> replica_of(const LayerNorm& full);

// A Dropout with full's p whose stream starts where full's stands now: the same masks from here on.
std::shared_ptr<Dropout> replica_of(Dropout& full);

}  // namespace accel::nn::parallel
