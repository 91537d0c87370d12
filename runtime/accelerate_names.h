// Accelerate's spellings read as accel's: its ACCELERATE_* environment variables as the ACCEL_* ones
// they mean, and its FSDP sharding-strategy numbers (1-4) as names, so job scripts and config files
// written for Hugging Face Accelerate keep their settings here.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/process_state.h"

namespace accel {

// One variable Accelerate sets (or a user sets for `accelerate launch`) that has a meaning here.
struct EnvironmentAlias {
  const char* accelerate_name;  // e.g. ACCELERATE_MIXED_PRECISION
  const char* accel_name;       // e.g. ACCEL_MIXED_PRECISION
  // Accelerate reads it only when this switch is on (ACCELERATE_USE_DEEPSPEED for the ZeRO stage);
  // nullptr: always.
  const char* needs_switch;
  // "switch": a yes/no value, which Python writes True/False; "fsdp": a sharding strategy, name or number;
  // "upper"/"lower": a name Accelerate reads in any case, passed on in the case accel's names use.
  const char* kind;
};

// ACCELERATE_MIXED_PRECISION, ACCELERATE_GRADIENT_ACCUMULATION_STEPS, ACCELERATE_USE_CPU,
// ACCELERATE_DEBUG_MODE (-> ACCEL_DEBUG), ACCELERATE_DEEPSPEED_ZERO_STAGE (with ACCELERATE_USE_DEEPSPEED,
// -> ACCEL_ZERO_STAGE), FSDP_SHARDING_STRATEGY (with ACCELERATE_USE_FSDP), PARALLELISM_CONFIG_TP_SIZE
// (-> ACCEL_TP_SIZE), and fp8's recipe: ACCELERATE_FP8_FORMAT, _MARGIN, _AMAX_HISTORY_LEN and
// _AMAX_COMPUTE_ALGO.
std::span<const EnvironmentAlias> accelerate_environment_aliases();

// A setting's variable as read: the value, spelled as accel reads it, and the name it came from.
struct EnvironmentValue {
  std::string value;
  std::string name;  // "ACCEL_MIXED_PRECISION", or the alias read: "ACCELERATE_MIXED_PRECISION"
};

// accel_name's value when set and non-empty (it wins), else its Accelerate alias's. A switch's
// Accelerate spelling (True, yes, on, 1 ...; False, no, off, 0 ...) becomes true/false; an FSDP
// number becomes its name; anything else is passed on as it is, for the setting's own check.
std::optional<EnvironmentValue> setting_variable(const EnvironmentVariables& env, const std::string& accel_name);

// "accel: reading ACCELERATE_MIXED_PRECISION=bf16 as ACCEL_MIXED_PRECISION (Accelerate's name)", one
// line per alias that is read (set, with accel's own name unset).
std::vector<std::string> accelerate_alias_notes(const EnvironmentVariables& env);

// Accelerate's yes/no spellings (its str_to_bool: y, yes, t, true, on, 1 and n, no, f, false, off, 0,
// any case); nullopt for anything else.
std::optional<bool> accelerate_switch(const std::string& text);

// FSDP's sharding strategy as Accelerate writes it: a name (FULL_SHARD ...) or its number, 1
// FULL_SHARD, 2 SHARD_GRAD_OP, 3 NO_SHARD, 4 HYBRID_SHARD. Returns the name; nullopt when it is neither.
std::optional<std::string> accelerate_sharding_strategy(const std::string& text);

}  // namespace accel
