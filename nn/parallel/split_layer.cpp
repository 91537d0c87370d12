// tensor_splits and first_split_layer: a walk over the module tree for SplitLayers.
#include "nn/parallel/split_layer.h"

namespace accel::nn::parallel {

std::map<std::string, TensorSplit> tensor_splits(Module& model) {
  std::map<std::string, TensorSplit> splits;
  for (const auto& [path, module] : model.named_modules())
    if (const auto* layer = dynamic_cast<const SplitLayer*>(module))
      for (const auto& [name, split] : layer->parameter_splits())
        splits.emplace(path.empty() ? name : path + "." + name, split);
  return splits;
}

std::string first_split_layer(Module& model) {
  for (const auto& [path, module] : model.named_modules())
    if (dynamic_cast<const SplitLayer*>(module)) return path.empty() ? "(the model itself)" : path;
  return "";
}

}  // namespace accel::nn::parallel
