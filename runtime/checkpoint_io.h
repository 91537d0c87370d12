// CheckpointIO: how a checkpoint's tensors reach storage and come back. The Accelerator asks the
// Strategy for state (gathered to full tensors where it is sharded) and hands it to a CheckpointIO;
// SafetensorsCheckpointIO writes one safetensors file, which PyTorch and Hugging Face read. Sharded
// files with global offsets, resharded on load, will be another implementation of this interface.
#pragma once

#include <map>
#include <string>

#include "nn/module.h"

namespace accel {

using CheckpointMetadata = std::map<std::string, std::string>;

class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  // Writes state to path, whole or not at all (never a truncated file).
  virtual void save(const std::string& path, const nn::StateDict& state, const CheckpointMetadata& metadata) = 0;
  virtual nn::StateDict load(const std::string& path) = 0;
};

class SafetensorsCheckpointIO final : public CheckpointIO {
 public:
  void save(const std::string& path, const nn::StateDict& state, const CheckpointMetadata& metadata) override;
  nn::StateDict load(const std::string& path) override;
};

}  // namespace accel
