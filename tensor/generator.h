// Generator: a seeded Philox stream. Its whole state is (seed, offset), so it fits in a checkpoint.
#pragma once

#include <cstdint>

namespace accel {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // Philox blocks consumed so far
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}

  // Reserves `blocks` Philox blocks and returns the offset of the first one.
  uint64_t reserve(uint64_t blocks) {
    const uint64_t first = state_.offset;
    state_.offset += blocks;
    return first;
  }
  uint64_t seed() const { return state_.seed; }
  // A seed for a child generator (a Dropout layer's, say), drawn from this stream.
  uint64_t next_seed();

  GeneratorState state() const { return state_; }
  void set_state(const GeneratorState& state) { state_ = state; }

 private:
  GeneratorState state_;
};

}  // namespace accel
