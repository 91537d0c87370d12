// The alias table and the spellings of Accelerate's values.
#include "runtime/accelerate_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "runtime/sharding_plugins.h"

namespace accel {

namespace {

constexpr std::array<EnvironmentAlias, 14> kAliases{{
    {"ACCELERATE_MIXED_PRECISION", "ACCEL_MIXED_PRECISION", nullptr, ""},
    {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "ACCEL_GRADIENT_ACCUMULATION_STEPS", nullptr, ""},
    {"ACCELERATE_USE_CPU", "ACCEL_USE_CPU", nullptr, "switch"},
    {"ACCELERATE_DEBUG_MODE", "ACCEL_DEBUG", nullptr, "switch"},
    {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCEL_ZERO_STAGE", "ACCELERATE_USE_DEEPSPEED", ""},
    {"FSDP_SHARDING_STRATEGY", "ACCEL_FSDP_SHARDING_STRATEGY", "ACCELERATE_USE_FSDP", "fsdp"},
    {"FSDP_TRANSFORMER_CLS_TO_WRAP", "ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", "ACCELERATE_USE_FSDP", ""},
    {"FSDP_MIN_NUM_PARAMS", "ACCEL_FSDP_MIN_NUM_PARAMS", "ACCELERATE_USE_FSDP", ""},
    // FSDP2's true/false; FSDP1 put a sharding strategy here, which FSDP_SHARDING_STRATEGY carries.
    {"FSDP_RESHARD_AFTER_FORWARD", "ACCEL_FSDP_RESHARD_AFTER_FORWARD", "ACCELERATE_USE_FSDP", "switch"},
    {"PARALLELISM_CONFIG_TP_SIZE", "ACCEL_TP_SIZE", nullptr, ""},
    // TERecipeKwargs reads these; it upper-cases the format and lower-cases the algorithm first.
    {"ACCELERATE_FP8_FORMAT", "ACCEL_FP8_FORMAT", nullptr, "upper"},
    {"ACCELERATE_FP8_MARGIN", "ACCEL_FP8_MARGIN", nullptr, ""},
    {"ACCELERATE_FP8_AMAX_HISTORY_LEN", "ACCEL_FP8_AMAX_HISTORY_LEN", nullptr, ""},
    {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "ACCEL_FP8_AMAX_COMPUTE_ALGO", nullptr, "lower"},
}};

std::optional<std::string> value_of(const EnvironmentVariables& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? std::nullopt : std::optional<std::string>(it->second);
}

// The alias of accel_name that is in effect: set, its switch (if any) on, and accel_name unset.
const EnvironmentAlias* alias_in_effect(const EnvironmentVariables& env, const std::string& accel_name) {
  if (value_of(env, accel_name)) return nullptr;
  for (const EnvironmentAlias& a : kAliases) {
    if (accel_name != a.accel_name || !value_of(env, a.accelerate_name)) continue;
    if (a.needs_switch && !accelerate_switch(value_of(env, a.needs_switch).value_or("")).value_or(false)) continue;
    return &a;
  }
  return nullptr;
}

std::string spelled_for_accel(const EnvironmentAlias& alias, const std::string& text) {
  if (std::string(alias.kind) == "switch") {
    if (const std::optional<bool> on = accelerate_switch(text)) return *on ? "true" : "false";
  } else if (std::string(alias.kind) == "fsdp") {
    if (const std::optional<std::string> name = accelerate_sharding_strategy(text)) return *name;
  } else if (std::string(alias.kind) == "upper" || std::string(alias.kind) == "lower") {
    const bool upper = std::string(alias.kind) == "upper";
    std::string cased = text;
    std::transform(cased.begin(), cased.end(), cased.begin(),
                   [upper](unsigned char c) { return upper ? std::toupper(c) : std::tolower(c); });
    return cased;
  }
  return text;
}

}  // namespace

std::span<const EnvironmentAlias> accelerate_environment_aliases() { return kAliases; }

std::optional<bool> accelerate_switch(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"y", "yes", "t", "true", "on", "1"})
    if (lower == yes) return true;
  for (const char* no : {"n", "no", "f", "false", "off", "0"})
    if (lower == no) return false;
  return std::nullopt;
}

std::optional<std::string> accelerate_sharding_strategy(const std::string& text) {
  // Accelerate numbers them from 1 in the order of torch's ShardingStrategy enum.
  static constexpr std::array<const char*, 5> kByNumber{"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                                        "HYBRID_SHARD_ZERO2"};
  if (text.size() == 1 && text[0] >= '1' && text[0] <= '5') return kByNumber[static_cast<size_t>(text[0] - '1')];
  if (value_in(kShardingStrategyNames, text)) return text;
  return std::nullopt;
}

std::optional<EnvironmentValue> setting_variable(const EnvironmentVariables& env, const std::string& accel_name) {
  if (const std::optional<std::string> own = value_of(env, accel_name)) return EnvironmentValue{*own, accel_name};
  const EnvironmentAlias* alias = alias_in_effect(env, accel_name);
  if (!alias) return std::nullopt;
  return EnvironmentValue{spelled_for_accel(*alias, *value_of(env, alias->accelerate_name)), alias->accelerate_name};
}

std::vector<std::string> accelerate_alias_notes(const EnvironmentVariables& env) {
  std::vector<std::string> notes;
  for (const EnvironmentAlias& a : kAliases) {
    if (alias_in_effect(env, a.accel_name) != &a) continue;
    notes.push_back(fmt::format("accel: reading {}={} as {} (Accelerate's name; {} wins when both are set)",
                                a.accelerate_name, *value_of(env, a.accelerate_name), a.accel_name, a.accel_name));
  }
  return notes;
}

}  // namespace accel
