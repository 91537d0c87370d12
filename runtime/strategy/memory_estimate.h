// The bytes one rank holds for parameters, gradients and optimizer state under plain data parallel
// (stage 0) and ZeRO stages 1-3: ZeRO's f32 formulas with Adam (16Ψ; 4Ψ + 4Ψ + 8Ψ/N; 4Ψ + 12Ψ/N;
// 16Ψ/N); under bf16/fp16 ZeRO's mixed-precision ones (2Ψ + 2Ψ + 12Ψ/N; 2Ψ + 14Ψ/N; 16Ψ/N, the 12
// being the f32 master and Adam's two moments), HYBRID_SHARD's (stage 3 over a shard group); plus
// what accel keeps besides (16-bit weight copies
// under DDP with bf16 and fp16, and under fp8).
// bench/zero_memory sets its measurements against the formula, and `accel estimate-memory` prints
// what accel holds.
#pragma once

#include <cstdint>

#include "autograd/mixed_precision.h"

namespace accel {

struct MemoryEstimate {
  // ZeRO's formula, term by term (what bench/zero_memory compares its measurements with):
  // The weights forward reads (stage 3: this rank's shard): f32, or 16-bit under ZeRO with bf16/fp16.
  int64_t parameters = 0;
  int64_t gradients = 0;        // in the parameters' dtype (stages 2 and 3: this rank's shard)
  // ZeRO with bf16/fp16: this rank's slice of the f32 masters (else the parameters are the masters).
  int64_t master_weights = 0;
  int64_t optimizer_state = 0;  // f32 (stages 1-3: this rank's shard)
  // What accel holds beyond the formula:
  // DDP with bf16/fp16, and fp8 at every stage (as a bound): the 16-bit copy of every parameter that autocast
  // computes with, whole on every rank. ZeRO with bf16/fp16 keeps none: its parameters are 16-bit.
  int64_t weight_copies = 0;
  int64_t formula_total() const { return parameters + gradients + master_weights + optimizer_state; }
  int64_t total() const { return formula_total() + weight_copies; }
};

// For Ψ = parameters (>= 0), ZeRO stage 0-3, N = ranks (>= 1) and the optimizer's state bytes per
// parameter (8 for Adam and AdamW: two f32 moments; 4 for SGD with momentum; 0 for plain SGD).
// A sharded amount is ceil(Ψ / N) elements per rank. Activations, buffers and the communication
// buckets are not counted. Throws accel::Error naming the bad value.
MemoryEstimate estimate_memory(int64_t parameters, int stage, int ranks, MixedPrecision precision,
                               int optimizer_state_bytes_per_parameter = 8);

// HYBRID_SHARD over ranks in shard groups of shard_size: stage 3 within a group and replicated across
// the groups, so a rank holds stage 3's bytes at N = shard_size. Throws accel::Error unless
// shard_size >= 1 divides ranks.
MemoryEstimate estimate_hybrid_shard_memory(int64_t parameters, int shard_size, int ranks, MixedPrecision precision,
                                            int optimizer_state_bytes_per_parameter = 8);

}  // namespace accel
