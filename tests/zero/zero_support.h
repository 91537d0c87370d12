// Shared pieces of the ZeRO tests: a model whose parameter sizes divide by no world size, its data, a
// wide model whose every layer is a unit, and one training loop that runs under DDP (zero_stage 0), a
// ZeRO stage or an FSDP strategy, and returns every micro-step's loss and the final full weights, to
// compare the stages with DDP.
#pragma once

#include <string>
#include <vector>

#include "../ddp/support.h"
#include "odd_mlp.h"

namespace test {

// samples rows of x ~ N(0, 1) in 7 dims, targets tanh(x W) in 3 dims, the same on every rank.
std::shared_ptr<TensorDataset> odd_data(int64_t samples);

struct ZeroSpec {
  int zero_stage = 0;  // 0: plain DDP, the reference
  bool fsdp = false;   // through FSDPPlugin (stage 2 or 3) instead of DeepSpeedPlugin
  std::string optimizer = "adamw";
  int steps = 20;  // optimizer steps
  int accumulation_steps = 1;
  std::string mixed_precision = "no";
  // Unset: the default (f32 for DDP; under ZeRO with bf16/fp16 the 16-bit dtype). "compute": DDP's
  // all-reduce in the 16-bit dtype, as ZeRO's is by default; "f32": ZeRO's reduce-scatters in f32.
  std::string grad_comm_dtype{};
  std::string backend = "auto";
  double loss_scale = 0;     // fp16's initial loss scale when > 0 (else the scaler's 2^16)
  double clip_norm = 0;      // clip_grad_norm to this when > 0, on the micro-step that updates
  double bucket_cap_mb = 256.0 / (1 << 20);  // 64 floats: several units over the small model
  AutoWrapPolicy auto_wrap{};
  bool reshard_after_forward = true;
  bool hybrid_zero2 = false;  // with hybrid_shard_size > 0: HYBRID_SHARD_ZERO2 instead of HYBRID_SHARD
  // > 0: FSDP's HYBRID_SHARD (stage 3 within shard groups of this many ranks, replicated across them);
  // zero_stage must then be 3.
  int hybrid_shard_size = 0;
  // With zero_stage 3 and fsdp: HYBRID_SHARD with hybrid_shard_size not given, so a shard group is
  // the ranks of one node, as the launcher reports them.
  bool hybrid_by_node = false;
  // Build the model under DeferredInit, every rank from the same seed (nothing is broadcast for it).
  bool deferred_init = false;
  // The model is GatedOddMlp: its branch is left out of every odd optimizer step, and its spare
  // Linear is never used.
  bool gated = false;
  // With gated: on one odd step in four rank 0 alone uses the branch (not under stage 3, which
  // gathers a unit on every rank or on none, as FSDP does).
  bool gated_by_rank = false;
};

// The model a spec trains: the odd-sized model, or GatedOddMlp.
std::shared_ptr<nn::Module> make_zero_model(const ZeroSpec& spec, uint64_t seed);

struct ZeroRun {
  std::vector<double> losses;   // this rank's loss at every micro-step
  std::vector<double> weights;  // the final full parameters, from get_state_dict
  std::vector<double> norms;    // clip_grad_norm's results, when clipping
  int64_t skipped_steps = 0;    // fp16: the steps the loss scaler skipped
  std::string strategy;         // the strategy's name
};

// 20 steps of global batch 8 per micro-step (split_batches), every rank starting from seed + rank
// (prepare takes rank 0's), or under deferred_init every rank from seed.
ZeroRun train_zero(const ZeroSpec& spec, uint64_t seed);

// 8 Linear(256, 256) layers, 526,336 f32 parameters (2.1 MB): each layer is one stage-3 unit.
std::shared_ptr<nn::Sequential> make_wide_mlp(uint64_t seed);
// The bytes of a state's tensors, in order: to compare states bitwise.
std::vector<unsigned char> bytes_of(const nn::StateDict& state);

// max over i of |a_i - b_i| / |b_i|: for values such as losses that are never near 0.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b);
// max |a - b| / max |b|: a vector's difference relative to its scale (weights, some of them near 0).
double rel_diff(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace test
