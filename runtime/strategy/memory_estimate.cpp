// estimate_memory: ZeRO's per-rank formulas, and what accel holds beyond them.
#include "runtime/strategy/memory_estimate.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace accel {

MemoryEstimate estimate_memory(int64_t parameters, int stage, int ranks, MixedPrecision precision,
                               int optimizer_state_bytes_per_parameter) {
  if (parameters < 0 || stage < 0 || stage > 3 || ranks < 1 || optimizer_state_bytes_per_parameter < 0)
    throw Error(fmt::format("estimate_memory: got {} parameters, stage {}, {} ranks, {} optimizer bytes per "
                            "parameter; expected parameters >= 0, stage 0-3, ranks >= 1, bytes >= 0",
                            parameters, stage, ranks, optimizer_state_bytes_per_parameter));
  const int64_t shard = (parameters + ranks - 1) / ranks;  // elements of one rank's slice
  MemoryEstimate m;
  m.optimizer_state = int64_t{optimizer_state_bytes_per_parameter} * (stage >= 1 ? shard : parameters);
  if (stage >= 1 && (precision == MixedPrecision::bf16 || precision == MixedPrecision::fp16)) {
    // ZeRO under bf16/fp16 (ZeroStrategy::shard_masters_in): 16-bit parameters and grads, and the f32
    // masters only as this rank's slice.
    m.parameters = 2 * (stage == 3 ? shard : parameters);
    m.gradients = 2 * (stage >= 2 ? shard : parameters);
    m.master_weights = 4 * shard;
    return m;
  }
  m.parameters = 4 * (stage == 3 ? shard : parameters);
  m.gradients = 4 * (stage >= 2 ? shard : parameters);
  // HalfPrecision's WeightCopies: one 16-bit tensor per master, cached from the first forward on. Under
  // fp8 the same bound: its FP8 Linears quantise their weights anew in each forward and keep no copy,
  // so their bf16 copies are never made, but which parameters those are needs the model, not a count.
  m.weight_copies = precision == MixedPrecision::no ? 0 : 2 * parameters;
  return m;
}

MemoryEstimate estimate_hybrid_shard_memory(int64_t parameters, int shard_size, int ranks, MixedPrecision precision,
                                            int optimizer_state_bytes_per_parameter) {
  if (shard_size < 1 || ranks < 1 || ranks % shard_size != 0)
    throw Error(fmt::format("estimate_hybrid_shard_memory: got shard groups of {} over {} ranks; expected a shard "
                            "size >= 1 that divides the rank count",
                            shard_size, ranks));
  return estimate_memory(parameters, 3, shard_size, precision, optimizer_state_bytes_per_parameter);
}

}  // namespace accel
