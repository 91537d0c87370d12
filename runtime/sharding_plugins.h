// The ZeRO / FSDP options of AcceleratorOptions, under Accelerate's names: DeepSpeedPlugin picks a
// ZeRO stage, FSDPPlugin a sharding strategy and the units it wraps. docs/zero.md explains the stages.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/named_values.h"

namespace accel {

// FSDP's sharding strategies. The values are fixed and only appended: they travel into files.
enum class ShardingStrategy : uint8_t {
  full_shard = 0,     // parameters, grads and optimizer state sharded: ZeRO stage 3
  shard_grad_op = 1,  // grads and optimizer state sharded: ZeRO stage 2
  no_shard = 2,       // plain data parallel: ZeRO stage 0
  hybrid_shard = 3,   // full_shard within a shard group (a node), replicated across the groups
  // hybrid_shard whose units stay gathered from their forward to the end of their backward
  // (reshard_after_forward false), as FSDP's _HYBRID_SHARD_ZERO2: fewer all-gathers, more memory
  hybrid_shard_zero2 = 4,
};

inline constexpr std::array<NamedValue<ShardingStrategy>, 5> kShardingStrategyNames{{
    {ShardingStrategy::full_shard, "FULL_SHARD"},
    {ShardingStrategy::shard_grad_op, "SHARD_GRAD_OP"},
    {ShardingStrategy::no_shard, "NO_SHARD"},
    {ShardingStrategy::hybrid_shard, "HYBRID_SHARD"},
    {ShardingStrategy::hybrid_shard_zero2, "HYBRID_SHARD_ZERO2"},
}};

constexpr const char* name_of(ShardingStrategy value) { return name_in(kShardingStrategyNames, value); }

// HYBRID_SHARD and HYBRID_SHARD_ZERO2: a {dp_replicate, dp_shard} mesh, and a hybrid_shard_size.
constexpr bool is_hybrid(ShardingStrategy s) {
  return s == ShardingStrategy::hybrid_shard || s == ShardingStrategy::hybrid_shard_zero2;
}
// The same for a strategy's name (false for a name that is no strategy).
inline bool is_hybrid(const std::string& name) {
  const std::optional<ShardingStrategy> s = value_in(kShardingStrategyNames, name);
  return s && is_hybrid(*s);
}

// DeepSpeed's ZeRO, as Accelerate's DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=2).
struct DeepSpeedPlugin {
  // 0: data parallel; 1: optimizer state sharded; 2: and grads; 3: and parameters.
  int zero_stage = 2;
  // Sets the Accelerator's gradient_accumulation_steps (giving both, differently, is an error).
  std::optional<int> gradient_accumulation_steps;
};

// Which modules become units of their own under stage 3 (each unit's parameters are gathered for its
// forward and backward only). A module matches by its type_name() or by holding at least
// min_num_params parameters in its subtree; the first match on a path from the root wraps the whole
// subtree, and the root unit holds the parameters no unit took. Both empty: every module that owns
// parameters directly (a Linear, a LayerNorm) is a unit.
struct AutoWrapPolicy {
  std::vector<std::string> module_types{};  // e.g. {"GPTBlock"}
  int64_t min_num_params = 0;             // 0: not used

  bool is_default() const { return module_types.empty() && min_num_params == 0; }
  // "GPTBlock", "min_num_params 100000", both joined by ", ", or "every module that owns parameters".
  std::string describe() const;
};

// Module type names separated by commas, as Accelerate's fsdp_transformer_layer_cls_to_wrap: "GPTBlock"
// or "GPTBlock, MLP". nullopt when a name is empty or not a type name (letters, digits and '_', not
// starting with a digit); kModuleTypesExpected says so in an error.
std::optional<std::vector<std::string>> parse_module_types(const std::string& text);
inline constexpr const char* kModuleTypesExpected =
    "module type names (letters, digits and '_', not starting with a digit) separated by commas";

// PyTorch FSDP, as Accelerate's FullyShardedDataParallelPlugin.
struct FSDPPlugin {
  ShardingStrategy sharding_strategy = ShardingStrategy::full_shard;
  AutoWrapPolicy auto_wrap{};
  // Free a unit's gathered parameters after its forward (gathered again in backward); false keeps
  // them until its backward is done.
  bool reshard_after_forward = true;
  // HYBRID_SHARD only: ranks per shard group, the inner dim of its {dp_replicate, dp_shard} mesh; it
  // must divide the world size (ACCEL_FSDP_HYBRID_SHARD_SIZE, the config file's
  // fsdp_hybrid_shard_size). 0: the ranks of one node, which needs more than one node.
  int hybrid_shard_size = 0;
};

// The ZeRO stage a sharding strategy means: FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD 0 (HYBRID_SHARD 3,
// within each shard group of its mesh).
constexpr int zero_stage_of(ShardingStrategy s) {
  return s == ShardingStrategy::shard_grad_op ? 2 : s == ShardingStrategy::no_shard ? 0 : 3;
}

}  // namespace accel
