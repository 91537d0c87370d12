// ParamGroup: some of an optimizer's parameters with settings of their own, as PyTorch's param_groups
// are: GPT-2 decays its 2-D weights and leaves biases and LayerNorm gains alone. A setting a group
// leaves out takes the optimizer's value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace accel::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  // By the optimizer's option names: "lr", "weight_decay", and AdamW's "beta1", "beta2", "eps" or
  // SGD's "momentum", "dampening". A group's lr keeps its ratio to the optimizer's lr, so a schedule
  // scales every group alike.
  std::map<std::string, double> settings;
};

}  // namespace accel::optim
