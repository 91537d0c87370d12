// SplitLayer: a tensor-parallel layer that says how each of its parameters is cut from the full
// layer's, so that a strategy can join the ranks' parts into the full model's state for a checkpoint
// and cut a full state into this rank's parts on load, whatever tp the state was saved at.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "collective/communicator.h"
#include "nn/module.h"
#include "nn/parallel/partition.h"

namespace accel::nn::parallel {

class SplitLayer {
 public:
  virtual ~SplitLayer() = default;
  // (parameter name within the layer, its split); parameters not listed are replicated.
  virtual std::vector<std::pair<std::string, TensorSplit>> parameter_splits() const = 0;
  // The group the parts are spread over.
  virtual Communicator& tp() const = 0;
};

// Every split parameter of model under its dotted name in model.named_parameters(); the rest are
// replicated. Empty for a model without tensor-parallel layers.
std::map<std::string, TensorSplit> tensor_splits(Module& model);

// The first tensor-parallel layer of model, by dotted name ("" when it has none): strategies that
// keep every parameter whole refuse such a model.
std::string first_split_layer(Module& model);

}  // namespace accel::nn::parallel
