// The Accelerate config file's keys mapped onto accel's: the values keep their nodes (and lines), so
// config_file.cpp checks them with accel's own rules and messages.
#include "runtime/accelerate_config.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "kernels/error.h"
#include "runtime/accelerate_names.h"
#include "runtime/sharding_plugins.h"

namespace accel {

namespace {

[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& message) {
  throw Error(fmt::format("{}:{}: {}", source, node.Mark().line + 1, message));
}

std::string scalar_or_empty(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : ""; }

// The keys of a mapping in file order; a key twice throws (yaml-cpp would keep the last silently).
std::vector<std::pair<std::string, YAML::Node>> entries(const YAML::Node& map, const std::string& source) {
  std::vector<std::pair<std::string, YAML::Node>> out;
  std::set<std::string> seen;
  for (const auto& entry : map) {
    const std::string key = scalar_or_empty(entry.first);
    if (!seen.insert(key).second) fail(source, entry.first, fmt::format("key '{}' appears twice", key));
    out.emplace_back(key, entry.second);
  }
  return out;
}

// The keys that carry over unchanged, under the same name.
const std::set<std::string>& same_keys() {
  static const std::set<std::string> keys = {"num_processes",   "num_machines", "machine_rank",
                                             "main_process_ip", "main_process_port", "use_cpu",
                                             "mixed_precision", "debug",        "gradient_accumulation_steps"};
  return keys;
}

// distributed_type: which block (if any) is read. Accelerate ignores the blocks of the other types too.
std::string sharding_block(const YAML::Node& root, const std::string& source) {
  const YAML::Node type = root["distributed_type"];
  if (!type) return "";
  const std::string text = scalar_or_empty(type);
  if (text == "NO" || text == "MULTI_CPU" || text == "MULTI_GPU") return "";
  if (text == "DEEPSPEED") return "deepspeed_config";
  if (text == "FSDP") return "fsdp_config";
  fail(source, type,
       fmt::format("distributed_type '{}' has no equivalent in accel, which runs on CPUs and CUDA GPUs; expected "
                   "NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP",
                   text));
}

void check_compute_environment(const YAML::Node& root, const std::string& source) {
  const YAML::Node where = root["compute_environment"];
  if (where && scalar_or_empty(where) != "LOCAL_MACHINE")
    fail(source, where,
         fmt::format("compute_environment '{}' is not one accel launches on; expected LOCAL_MACHINE",
                     scalar_or_empty(where)));
}

// deepspeed_config: zero_stage and gradient_accumulation_steps; DeepSpeedPlugin's stage 2 when absent.
void read_deepspeed(const YAML::Node& block, const std::string& source, AccelerateTranslation& out) {
  out.accel_keys["zero_stage"] = 2;
  for (const auto& [key, value] : entries(block, source)) {
    if (key == "zero_stage" && !value.IsNull())
      out.accel_keys["zero_stage"] = value;
    else if (key == "gradient_accumulation_steps" && !value.IsNull())
      out.accel_keys["gradient_accumulation_steps"] = value;
    else
      out.ignored_keys.push_back("deepspeed_config." + key);
  }
}

// fsdp_config's units: fsdp_auto_wrap_policy says which of the two keys FSDP reads (both without it).
// The other is ignored, as FSDP ignores it, and so are NO_WRAP (stage 3 here always makes units) and
// all of them under a strategy other than stage 3, which has no units (as FSDP's SHARD_GRAD_OP
// keeps its wrapping only for where it reduces).
void read_fsdp_auto_wrap(const std::map<std::string, YAML::Node>& keys, bool stage3, const std::string& source,
                         AccelerateTranslation& out) {
  const bool has_policy = keys.count("fsdp_auto_wrap_policy") > 0;
  const YAML::Node policy = has_policy ? keys.at("fsdp_auto_wrap_policy") : YAML::Node();
  const std::string name = has_policy ? scalar_or_empty(policy) : "";
  if (has_policy && name != "TRANSFORMER_BASED_WRAP" && name != "SIZE_BASED_WRAP" && name != "NO_WRAP")
    fail(source, policy, fmt::format("fsdp_config.fsdp_auto_wrap_policy must be TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP "
                                     "or NO_WRAP, got '{}'",
                                     name));
  if (stage3 && name == "TRANSFORMER_BASED_WRAP" && !keys.count("fsdp_transformer_layer_cls_to_wrap"))
    fail(source, policy, "fsdp_config.fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP needs "
                         "fsdp_transformer_layer_cls_to_wrap (accel cannot read a model's _no_split_modules)");
  if (stage3 && name == "SIZE_BASED_WRAP" && !keys.count("fsdp_min_num_params"))
    fail(source, policy, "fsdp_config.fsdp_auto_wrap_policy SIZE_BASED_WRAP needs fsdp_min_num_params");
  for (const auto& [key, value] : keys) {
    const bool read = stage3 && ((key == "fsdp_transformer_layer_cls_to_wrap" && name != "SIZE_BASED_WRAP" && name != "NO_WRAP") ||
                                 (key == "fsdp_min_num_params" && name != "TRANSFORMER_BASED_WRAP" && name != "NO_WRAP"));
    if (read) out.accel_keys[key] = value;
    else if (key != "fsdp_auto_wrap_policy" || name == "NO_WRAP" || !stage3) out.ignored_keys.push_back("fsdp_config." + key);
  }
}

// fsdp_config: the sharding strategy by name or number, or FSDP2's reshard flag (FULL_SHARD when
// absent), and the units.
void read_fsdp(const YAML::Node& block, const std::string& source, AccelerateTranslation& out) {
  std::string strategy = "FULL_SHARD";
  bool named = false;
  std::map<std::string, YAML::Node> wrap_keys;
  for (const auto& [key, value] : entries(block, source)) {
    const std::string text = scalar_or_empty(value);
    if ((key == "fsdp_auto_wrap_policy" || key == "fsdp_transformer_layer_cls_to_wrap" ||
         key == "fsdp_min_num_params") && !value.IsNull()) {
      wrap_keys[key] = value;
    } else if (key == "fsdp_sharding_strategy" && !value.IsNull()) {
      const std::optional<std::string> name = accelerate_sharding_strategy(text);
      if (!name)
        fail(source, value, fmt::format("fsdp_config.fsdp_sharding_strategy must be FULL_SHARD, SHARD_GRAD_OP, "
                                        "NO_SHARD, HYBRID_SHARD or 1-4, got '{}'",
                                        text));
      strategy = *name, named = true;
    } else if (key == "fsdp_reshard_after_forward" && !value.IsNull() && !named) {
      // FSDP2 (fsdp_version: 2) writes this instead: true frees parameters after forward (FULL_SHARD).
      const std::optional<bool> on = accelerate_switch(text);
      const std::optional<std::string> name = accelerate_sharding_strategy(text);
      if (!on && !name)
        fail(source, value, fmt::format("fsdp_config.fsdp_reshard_after_forward must be true, false or a sharding "
                                        "strategy, got '{}'",
                                        text));
      strategy = on ? (*on ? "FULL_SHARD" : "SHARD_GRAD_OP") : *name;
    } else {
      out.ignored_keys.push_back("fsdp_config." + key);
    }
  }
  YAML::Node node(strategy);
  out.accel_keys["fsdp_sharding_strategy"] = node;
  const std::optional<ShardingStrategy> sharding = value_in(kShardingStrategyNames, strategy);
  read_fsdp_auto_wrap(wrap_keys, sharding && zero_stage_of(*sharding) == 3, source, out);
}

// fp8_config: the Transformer Engine recipe's keys under accel's fp8_* names. Both spellings of the
// history and algorithm keys count: `accelerate config` writes amax_history_length and
// amax_compute_algorithm, while `accelerate launch` and TERecipeKwargs use amax_history_len and
// amax_compute_algo. What accel cannot honour is refused rather than silently changed.
void read_fp8(const YAML::Node& block, const std::string& source, AccelerateTranslation& out) {
  static const std::map<std::string, std::string> kRecipeKeys = {
      {"fp8_format", "fp8_format"},
      {"margin", "fp8_margin"},
      {"amax_history_len", "fp8_amax_history_len"},
      {"amax_history_length", "fp8_amax_history_len"},
      {"amax_compute_algo", "fp8_amax_compute_algo"},
      {"amax_compute_algorithm", "fp8_amax_compute_algo"}};
  for (const auto& [key, value] : entries(block, source)) {
    if (value.IsNull()) continue;
    const std::string text = scalar_or_empty(value);
    if (const auto it = kRecipeKeys.find(key); it != kRecipeKeys.end()) {
      const YAML::Node& keys = out.accel_keys;  // const: looking a key up must not add it
      if (keys[it->second])
        fail(source, value, fmt::format("fp8_config.{} sets {} a second time", key, it->second));
      out.accel_keys[it->second] = value;
    } else if (key == "backend") {
      if (text != "TE" && text != "te")
        fail(source, value, fmt::format("fp8_config.backend '{}' has no equivalent in accel, whose fp8 is Transformer "
                                        "Engine's delayed scaling; expected TE",
                                        text));
    } else if (key == "interval") {
      if (text != "1")
        fail(source, value, fmt::format("fp8_config.interval {} is not supported: accel recomputes the fp8 scales "
                                        "every step; expected 1",
                                        text));
    } else {
      out.ignored_keys.push_back("fp8_config." + key);
    }
  }
}

}  // namespace

bool is_accelerate_config(const YAML::Node& root) {
  return root.IsMap() && (root["compute_environment"] || root["distributed_type"]);
}

AccelerateTranslation translate_accelerate_config(const YAML::Node& root, const std::string& source) {
  AccelerateTranslation out;
  out.accel_keys = YAML::Node(YAML::NodeType::Map);
  check_compute_environment(root, source);
  const std::string block = sharding_block(root, source);
  for (const auto& [key, value] : entries(root, source)) {
    if (key == "compute_environment" || key == "distributed_type") continue;  // read above
    if (same_keys().count(key)) {
      if (value.IsNull()) continue;  // Accelerate writes `main_process_ip: null` for "not set"
      out.accel_keys[key] = value;
    } else if (key == "fp8_config" && (value.IsMap() || value.IsNull())) {
      if (value.IsMap()) read_fp8(value, source, out);
    } else if (key == block && value.IsMap()) {
      if (key == "deepspeed_config") read_deepspeed(value, source, out);
      else read_fsdp(value, source, out);
    } else {
      out.ignored_keys.push_back(key);
    }
  }
  // Several machines: accel's environment key says so (hostfile or machine flags at launch).
  const YAML::Node& keys = out.accel_keys;  // const: looking a key up must not add it
  const YAML::Node machines = keys["num_machines"];
  int count = 1;
  if (machines && machines.IsScalar() && YAML::convert<int>::decode(machines, count) && count > 1)
    out.accel_keys["environment"] = "hosts";
  return out;
}

}  // namespace accel
