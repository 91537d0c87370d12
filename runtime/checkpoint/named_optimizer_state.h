// An optimizer's state keyed by parameter name ("state.fc1.weight.exp_avg") instead of by position
// ("state.0.exp_avg"), so that a checkpoint survives a change of the model code that reorders or adds
// parameters. A parameter's group ("param_group.<i>") is keyed by its name the same way. The optimizer
// itself keeps its positional keys; these convert at the checkpoint.
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace accel {

// names[i] is the name of the optimizer's parameter i.
optim::StateDict name_optimizer_state(const optim::StateDict& by_index, const std::vector<std::string>& names);
// The reverse. A name no parameter has, or a parameter missing a slot that the others have, throws an
// accel::Error naming source (the file) and the key.
optim::StateDict index_optimizer_state(const optim::StateDict& by_name, const std::vector<std::string>& names,
                                       const std::string& source);
// The same for the keys alone, in order (for a state read lazily).
std::vector<std::string> index_optimizer_keys(const std::vector<std::string>& by_name,
                                              const std::vector<std::string>& names, const std::string& source);

}  // namespace accel
