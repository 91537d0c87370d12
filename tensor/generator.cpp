// Generator: deriving child seeds from a Philox stream.
#include "tensor/generator.h"

#include "kernels/philox.h"

namespace accel {

uint64_t Generator::next_seed() {
  const Philox4 r = philox4x32(state_.seed, reserve(1), 0);
  return (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
}

}  // namespace accel
