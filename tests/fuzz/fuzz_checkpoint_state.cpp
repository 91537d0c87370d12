// libFuzzer harness for a checkpoint's JSON files: the same bytes as accelerator_state.json and as a
// model.safetensors.index.json. Each either parses or throws accel::Error (any other exception, a
// crash or a sanitizer report is a finding); what parses is in range.
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/checkpoint/checkpoint_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const accel::SavedCheckpointState s = accel::parse_checkpoint_state(text, "accelerator_state.json");
    FUZZ_CHECK(s.format >= 1 && s.format <= accel::kCheckpointFormat);
    FUZZ_CHECK(s.world_size >= 1);  // a rank's streams are taken modulo it
    for (const accel::SavedLoaderPosition& l : s.loaders) FUZZ_CHECK(l.epoch >= 0 && l.samples_seen >= 0);
  } catch (const accel::Error&) {
  }
  try {
    for (const std::string& file : accel::parse_shard_index(text, "model.safetensors.index.json"))
      FUZZ_CHECK(!file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos);
  } catch (const accel::Error&) {
  }
  return 0;
}
