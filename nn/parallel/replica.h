// Replicas: copies of the modules that a tensor-parallel layer keeps whole on every rank (LayerNorm,
// the dropouts on replicated tensors), taken from the full layer it is built from.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/parallel/partition.h"

namespace accel::nn::parallel {

// A LayerNorm with full's eps, and copies of its weight and bias (dtype and device included); full
// itself for FromFull::in_place.
std::shared_ptr<LayerNorm> replica_of(const std::shared_ptr<LayerNorm>& full, FromFull how);

// A Dropout with full's p whose stream starts where full's stands now: the same masks from here on;
// full itself for FromFull::in_place.
std::shared_ptr<Dropout> replica_of(const std::shared_ptr<Dropout>& full, FromFull how);

}  // namespace accel::nn::parallel
