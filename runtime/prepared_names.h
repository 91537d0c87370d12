// The names of prepared models' parameters as checkpoints and the sanity report use them: the first
// model's own names, "model_<i>." before the names of the i-th model after it.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace accel {

// Every live prepared model's parameters, in preparation order, each with its name.
nn::StateDict prepared_named_parameters(const std::vector<std::weak_ptr<nn::Module>>& models);
// The same as a lookup from a parameter to its name.
std::unordered_map<const TensorImpl*, std::string> prepared_parameter_names(
    const std::vector<std::weak_ptr<nn::Module>>& models);

}  // namespace accel
