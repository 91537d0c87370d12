// The names of prepared models' parameters (checkpoint keys, sanity report lines).
#include "runtime/prepared_names.h"

#include <fmt/format.h>

namespace accel {

nn::StateDict prepared_named_parameters(const std::vector<std::weak_ptr<nn::Module>>& models) {
  nn::StateDict out;
  for (size_t i = 0; i < models.size(); ++i)
    if (auto model = models[i].lock())
      for (const auto& [name, p] : model->named_parameters())
        out.emplace_back(i == 0 ? name : fmt::format("model_{}.{}", i, name), p);
  return out;
}

std::unordered_map<const TensorImpl*, std::string> prepared_parameter_names(
    const std::vector<std::weak_ptr<nn::Module>>& models) {
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const auto& [name, p] : prepared_named_parameters(models)) names.emplace(p.impl(), name);
  return names;
}

}  // namespace accel
