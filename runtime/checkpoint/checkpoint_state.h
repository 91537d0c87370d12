// The JSON files of a checkpoint, read from their text: accelerator_state.json (format, world size,
// counts and positions) and a sharded model's <stem>.safetensors.index.json. Every field is checked
// for its type and range here, so the loader can trust what it gets (and the fuzzers can feed bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

// Bumped when the layout changes; a checkpoint of a newer format is refused.
inline constexpr int kCheckpointFormat = 1;

struct SavedLoaderPosition {
  int64_t epoch = 0;
  int64_t samples_seen = 0;  // of the current epoch, over all ranks
};

// What accelerator_state.json holds that load_state reads.
struct SavedCheckpointState {
  int format = 0;
  int world_size = 1;
  uint64_t models = 0, optimizers = 0, objects = 0, generators = 0;
  std::vector<SavedLoaderPosition> loaders;
  int64_t completed_steps = 0;
  int64_t micro_step = 0;
  uint64_t batches_seen = 0, batches = 0;
};

// Parses accelerator_state.json's text. Throws accel::Error naming source and the field when the
// text is not JSON, a field has the wrong type or range, or the format is not one this accel reads.
SavedCheckpointState parse_checkpoint_state(std::string_view text, const std::string& source);

// The shard files a <stem>.safetensors.index.json names in its weight_map, each once, in order of
// first appearance. Throws accel::Error naming source when the text is not such an index, or a file
// is not a plain file name (a path would reach outside the checkpoint directory).
std::vector<std::string> parse_shard_index(std::string_view text, const std::string& source);

}  // namespace accel
