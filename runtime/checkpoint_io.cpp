// SafetensorsCheckpointIO: state dicts to and from safetensors files.
#include "runtime/checkpoint_io.h"

#include "runtime/safetensors.h"

namespace accel {

void SafetensorsCheckpointIO::save(const std::string& path, const nn::StateDict& state,
                                   const CheckpointMetadata& metadata) {
  save_safetensors(path, state, metadata);
}

nn::StateDict SafetensorsCheckpointIO::load(const std::string& path) { return load_safetensors(path).tensors; }

}  // namespace accel
