// Config file parsing with yaml-cpp: every key is checked against the known ones and every value
// against its type and range, and errors carry the line the user has to fix.
#include "runtime/config_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "runtime/accelerate_config.h"
#include "runtime/sharding_plugins.h"
#include "runtime/tracking/tracker_names.h"

namespace accel {

namespace {

[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& message) {
  throw Error(fmt::format("{}:{}: {}", source, node.Mark().line + 1, message));
}

int as_int(const std::string& source, const std::string& key, const YAML::Node& value, int min,
           int max = std::numeric_limits<int>::max()) {
  int out = 0;
  if (!value.IsScalar() || !YAML::convert<int>::decode(value, out) || out < min)
    fail(source, value, fmt::format("{} must be an integer >= {}, got '{}'", key, min, value.IsScalar() ? value.Scalar() : "a non-scalar"));
  if (out > max) fail(source, value, fmt::format("{} must be at most {}, got {}", key, max, out));
  return out;
}

std::string as_choice(const std::string& source, const std::string& key, const YAML::Node& value,
                      std::initializer_list<const char*> choices) {
  const std::string text = value.IsScalar() ? value.Scalar() : "";
  for (const char* c : choices)
    if (text == c) return text;
  fail(source, value, fmt::format("{} must be one of {}, got '{}'", key, fmt::join(choices, ", "),
                                  value.IsScalar() ? text : "a non-scalar"));
}

// A name from an enum's table, available now.
template <class E, size_t N>
E as_named(const std::string& source, const std::string& key, const YAML::Node& value,
           const std::array<NamedValue<E>, N>& table) {
  const std::string text = value.IsScalar() ? value.Scalar() : "";
  const std::optional<E> named = value_in(table, text);
  if (named && available_in(table, *named)) return *named;
  fail(source, value, fmt::format("{} must be one of {}, got '{}'", key, fmt::join(available_names(table), ", "),
                                  value.IsScalar() ? text : "a non-scalar"));
}

std::string as_string(const std::string& source, const std::string& key, const YAML::Node& value) {
  if (!value.IsScalar()) fail(source, value, fmt::format("{} must be a string", key));
  return value.Scalar();
}

bool as_bool(const std::string& source, const std::string& key, const YAML::Node& value) {
  bool out = false;
  if (!value.IsScalar() || !YAML::convert<bool>::decode(value, out))
    fail(source, value, fmt::format("{} must be true or false, got '{}'", key, value.IsScalar() ? value.Scalar() : "a non-scalar"));
  return out;
}

// A list of tracker names: a YAML sequence, or one string of names separated by commas.
std::vector<std::string> as_tracker_list(const std::string& source, const std::string& key, const YAML::Node& value) {
  std::string text;
  if (value.IsSequence()) {
    for (const auto& item : value) {
      if (!item.IsScalar()) fail(source, item, fmt::format("{} must list names, got a non-scalar", key));
      text += (text.empty() ? "" : ",") + item.Scalar();
    }
  } else if (value.IsScalar()) {
    text = value.Scalar();
  } else if (!value.IsNull()) {
    fail(source, value, fmt::format("{} must be a list of {}", key, tracker_choices()));
  }
  const std::optional<std::vector<std::string>> names = parse_tracker_list(text);
  if (!names) fail(source, value, fmt::format("{} must be a list of {}, got '{}'", key, tracker_choices(), text));
  return *names;
}

// Module type names: a YAML sequence, or one string of names separated by commas; null or "": none.
std::vector<std::string> as_module_types(const std::string& source, const std::string& key, const YAML::Node& value) {
  std::string text;
  if (value.IsSequence()) {
    for (const auto& item : value) {
      if (!item.IsScalar()) fail(source, item, fmt::format("{} must list module type names, got a non-scalar", key));
      text += (text.empty() ? "" : ",") + item.Scalar();
    }
  } else if (value.IsScalar()) {
    text = value.Scalar();
  } else if (!value.IsNull()) {
    fail(source, value, fmt::format("{} must be a list of module type names", key));
  }
  if (text.empty()) return {};
  const std::optional<std::vector<std::string>> names = parse_module_types(text);
  if (!names) fail(source, value, fmt::format("{} must be {}, got '{}'", key, kModuleTypesExpected, text));
  return *names;
}

using Setter = std::function<void(ConfigFile&, const std::string&, const YAML::Node&)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"environment", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.environment = as_choice(s, "environment", v, {"local", "hosts", "slurm"}); }},
      {"num_machines", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.num_machines = as_int(s, "num_machines", v, 1, kMaxProcesses); }},
      {"num_processes", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.num_processes = as_int(s, "num_processes", v, 1, kMaxProcesses); }},
      {"machine_rank", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.machine_rank = as_int(s, "machine_rank", v, 0); }},
      {"main_process_ip", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.main_process_ip = as_string(s, "main_process_ip", v); }},
      {"main_process_port", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.main_process_port = as_int(s, "main_process_port", v, 1, 65535); }},
      {"hostfile", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.hostfile = as_string(s, "hostfile", v); }},
      {"mixed_precision", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.mixed_precision = as_named(s, "mixed_precision", v, kMixedPrecisionNames); }},
      {"gradient_accumulation_steps", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.gradient_accumulation_steps = as_int(s, "gradient_accumulation_steps", v, 1); }},
      {"use_cpu", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.use_cpu = as_bool(s, "use_cpu", v); }},
      {"backend", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.backend = as_named(s, "backend", v, kBackendNames); }},
      {"zero_stage", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.zero_stage = as_int(s, "zero_stage", v, 0);
         if (c.zero_stage > 3) fail(s, v, fmt::format("zero_stage must be 0, 1, 2 or 3, got {}", c.zero_stage));
       }},
      {"tp_size", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.tp_size = as_int(s, "tp_size", v, 1, kMaxProcesses); }},
      {"fsdp_sharding_strategy", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         const std::string text = as_string(s, "fsdp_sharding_strategy", v);
         if (!text.empty()) as_named(s, "fsdp_sharding_strategy", v, kShardingStrategyNames);
         c.fsdp_sharding_strategy = text;
       }},
      {"fsdp_hybrid_shard_size", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.fsdp_hybrid_shard_size = as_int(s, "fsdp_hybrid_shard_size", v, 0, kMaxProcesses);
       }},
      {"fsdp_transformer_layer_cls_to_wrap", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.fsdp_transformer_layer_cls_to_wrap = as_module_types(s, "fsdp_transformer_layer_cls_to_wrap", v);
       }},
      {"fsdp_min_num_params", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.fsdp_min_num_params = as_int(s, "fsdp_min_num_params", v, 0);
       }},
      {"fsdp_reshard_after_forward", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.fsdp_reshard_after_forward = as_bool(s, "fsdp_reshard_after_forward", v);
       }},
      {"log_with", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.log_with = as_tracker_list(s, "log_with", v); }},
      {"debug", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.debug = as_bool(s, "debug", v); }},
      {"timeout", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.timeout = as_int(s, "timeout", v, 1, kMaxTimeoutSeconds); }},
      {"sanity_check", [](ConfigFile& c, const std::string& s, const YAML::Node& v) {
         c.sanity_check = as_bool(s, "sanity_check", v);
       }},
      {"fp8_format", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.fp8_format = as_named(s, "fp8_format", v, fp8::kFormatNames); }},
      {"fp8_margin", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.fp8_margin = as_int(s, "fp8_margin", v, 0, 64); }},
      {"fp8_amax_history_len", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.fp8_amax_history_len = as_int(s, "fp8_amax_history_len", v, 1, 1 << 24); }},
      {"fp8_amax_compute_algo", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.fp8_amax_compute_algo = as_named(s, "fp8_amax_compute_algo", v, fp8::kAmaxAlgorithmNames); }},
      {"fp8_include_first_last", [](ConfigFile& c, const std::string& s, const YAML::Node& v) { c.fp8_include_first_last = as_bool(s, "fp8_include_first_last", v); }},
  };
  return table;
}

}  // namespace

std::string default_config_path() {
  if (const char* explicit_path = std::getenv("ACCEL_CONFIG_FILE"); explicit_path && *explicit_path) return explicit_path;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return std::string(xdg) + "/accel/config.yaml";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.config/accel/config.yaml";
}

ConfigFile parse_config(const std::string& yaml_text, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: {}", source_name, e.mark.line + 1, e.msg));
  }
  ConfigFile config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) fail(source_name, root, "expected a mapping of keys to values");
  AccelerateTranslation translated;
  const bool accelerate = is_accelerate_config(root);
  if (accelerate) {
    translated = translate_accelerate_config(root, source_name);
    config.origin.format = "accelerate";
    config.origin.ignored_keys = translated.ignored_keys;
  }
  const YAML::Node keys = accelerate ? translated.accel_keys : root;
  std::set<std::string> seen;
  for (const auto& entry : keys) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    // YAML forbids a key twice in one mapping; yaml-cpp would keep the last without a word.
    if (!seen.insert(key).second) fail(source_name, entry.first, fmt::format("key '{}' appears twice", key));
    auto it = setters().find(key);
    if (it == setters().end()) {
      std::vector<std::string> known;
      for (const auto& [k, _] : setters()) known.push_back(k);
      fail(source_name, entry.first, fmt::format("unknown key '{}' (known keys: {})", key, fmt::join(known, ", ")));
    }
    it->second(config, source_name, entry.second);
  }
  validate_config(config, source_name);
  return config;
}

void validate_config(const ConfigFile& c, const std::string& source) {
  // The launcher's flags reach here without the file's checks.
  if (c.num_processes < 1 || c.num_processes > kMaxProcesses || c.num_machines < 1 || c.num_machines > kMaxProcesses)
    throw Error(fmt::format("{}: num_processes {} and num_machines {} must be from 1 to {}", source, c.num_processes,
                            c.num_machines, kMaxProcesses));
  if (c.main_process_port < 1 || c.main_process_port > 65535)
    throw Error(fmt::format("{}: main_process_port {} must be from 1 to 65535", source, c.main_process_port));
  if (c.machine_rank >= c.num_machines)
    throw Error(fmt::format("{}: machine_rank {} must be below num_machines {}", source, c.machine_rank, c.num_machines));
  if (c.num_processes < c.num_machines)
    throw Error(fmt::format("{}: num_processes {} is fewer than num_machines {}", source, c.num_processes, c.num_machines));
  if (c.environment == "local" && c.num_machines != 1)
    throw Error(fmt::format("{}: environment 'local' runs on one machine, but num_machines is {}", source, c.num_machines));
  if (c.use_cpu && c.backend == Backend::nccl)
    throw Error(fmt::format("{}: use_cpu true contradicts backend 'nccl' (NCCL needs GPUs)", source));
  if (c.num_processes % c.tp_size != 0)
    throw Error(fmt::format("{}: tp_size {} does not divide num_processes {}", source, c.tp_size, c.num_processes));
  if (c.fsdp_hybrid_shard_size != 0 && !is_hybrid(c.fsdp_sharding_strategy))
    throw Error(fmt::format("{}: fsdp_hybrid_shard_size {} is for fsdp_sharding_strategy HYBRID_SHARD (or "
                            "HYBRID_SHARD_ZERO2), but that is "
                            "'{}'",
                            source, c.fsdp_hybrid_shard_size, c.fsdp_sharding_strategy));
  if (c.fsdp_hybrid_shard_size != 0 && (c.num_processes / c.tp_size) % c.fsdp_hybrid_shard_size != 0)
    throw Error(fmt::format("{}: fsdp_hybrid_shard_size {} does not divide num_processes {}{}", source,
                            c.fsdp_hybrid_shard_size, c.num_processes,
                            c.tp_size == 1 ? "" : fmt::format(" over tp_size {} ({})", c.tp_size,
                                                              c.num_processes / c.tp_size)));
  const bool wraps = !c.fsdp_transformer_layer_cls_to_wrap.empty() || c.fsdp_min_num_params != 0;
  const std::optional<ShardingStrategy> fsdp = value_in(kShardingStrategyNames, c.fsdp_sharding_strategy);
  if (wraps && !(fsdp && zero_stage_of(*fsdp) == 3) && c.zero_stage != 3)
    throw Error(fmt::format("{}: fsdp_transformer_layer_cls_to_wrap and fsdp_min_num_params choose stage 3's units, but "
                            "the sharding is zero_stage {}, fsdp_sharding_strategy '{}'; give FULL_SHARD or "
                            "HYBRID_SHARD (or zero_stage 3), or leave them out",
                            source, c.zero_stage, c.fsdp_sharding_strategy));
  const bool stage3 = (fsdp && zero_stage_of(*fsdp) == 3) || c.zero_stage == 3;
  if (!c.fsdp_reshard_after_forward && !stage3)
    throw Error(fmt::format("{}: fsdp_reshard_after_forward false is for stage 3, whose parameters are sharded, but the "
                            "sharding is zero_stage {}, fsdp_sharding_strategy '{}'; give FULL_SHARD or HYBRID_SHARD "
                            "(or zero_stage 3), or leave it out",
                            source, c.zero_stage, c.fsdp_sharding_strategy));
  if (c.zero_stage != 0 && !c.fsdp_sharding_strategy.empty())
    throw Error(fmt::format("{}: zero_stage {} and fsdp_sharding_strategy {} are two ways to shard; give one", source,
                            c.zero_stage, c.fsdp_sharding_strategy));
}

ConfigFile load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("load_config: cannot open '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

namespace {

// A YAML double-quoted scalar that reads back as s, byte for byte: '"' and '\\' escaped, and the
// control characters as \xNN (a path or address written verbatim could end the quotes early, or be
// read as an escape, and `accel config` would save a file it then refuses).
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

std::string to_yaml(const ConfigFile& c) {
  return fmt::format(
      "# accel config: written by `accel config`; read by `accel launch` and the Accelerator.\n"
      "# Where the job runs: local (this machine), hosts (several machines), slurm.\n"
      "environment: {}\n"
      "# Machines, and processes over all of them (one per GPU, or per CPU socket/core group).\n"
      "num_machines: {}\n"
      "num_processes: {}\n"
      "# This machine's index when launching with machine flags (0 is the main machine).\n"
      "machine_rank: {}\n"
      "main_process_ip: {}\n"
      "main_process_port: {}\n"
      "# An Open MPI hostfile (one 'host slots=N' per line); takes the place of the machine flags.\n"
      "hostfile: {}\n"
      "# no, fp16 (with a dynamic loss scaler), bf16 or fp8 (delayed scaling: docs/mixed_precision.md).\n"
      "mixed_precision: {}\n"
      "gradient_accumulation_steps: {}\n"
      "# Train on the CPU even when GPUs are present.\n"
      "use_cpu: {}\n"
      "# Gradient all-reduce: auto (nccl on GPUs, else mpi), mpi, ring, nccl.\n"
      "backend: {}\n"
      "# Sharded data parallelism, one of the two: ZeRO stage 1-3 (0: none), or FULL_SHARD, SHARD_GRAD_OP, NO_SHARD,\n"
      "# HYBRID_SHARD (FULL_SHARD within groups of fsdp_hybrid_shard_size ranks, 0: one node's; replicated across them).\n"
      "zero_stage: {}\n"
      "fsdp_sharding_strategy: {}\n"
      "fsdp_hybrid_shard_size: {}\n"
      "# Stage 3's units: these module types ([]: none), and modules of at least fsdp_min_num_params parameters\n"
      "# (0: none); with neither, every module that owns parameters.\n"
      "fsdp_transformer_layer_cls_to_wrap: [{}]\n"
      "fsdp_min_num_params: {}\n"
      "# Stage 3 frees each unit's gathered parameters after its forward (true), or keeps them to its backward.\n"
      "fsdp_reshard_after_forward: {}\n"
      "# Tensor parallelism: ranks per group sharing each layer (1: none); it divides num_processes.\n"
      "tp_size: {}\n"
      "# Trackers of logged values (docs/tracking.md): jsonl, csv, tensorboard, all.\n"
      "log_with: [{}]\n"
      "# The first-step sanity report (docs/debugging.md), as accel launch --check.\n"
      "sanity_check: {}\n"
      "# Debug mode: extra checks that cost time (every rank calls the same collective with matching shapes).\n"
      "debug: {}\n"
      "# Seconds a collective may wait for the other ranks before the job ends with a stall report.\n"
      "timeout: {}\n"
      "# fp8's recipe: format HYBRID or E4M3, scale margin, amax history steps, amax max or most_recent, and\n"
      "# whether the model's first and last Linear run in fp8 too.\n"
      "fp8_format: {}\n"
      "fp8_margin: {}\n"
      "fp8_amax_history_len: {}\n"
      "fp8_amax_compute_algo: {}\n"
      "fp8_include_first_last: {}\n",
      c.environment, c.num_machines, c.num_processes, c.machine_rank, yaml_quoted(c.main_process_ip),
      c.main_process_port, yaml_quoted(c.hostfile), name_of(c.mixed_precision), c.gradient_accumulation_steps,
      c.use_cpu ? "true" : "false", name_of(c.backend), c.zero_stage, yaml_quoted(c.fsdp_sharding_strategy),
      c.fsdp_hybrid_shard_size, fmt::join(c.fsdp_transformer_layer_cls_to_wrap, ", "), c.fsdp_min_num_params,
      c.fsdp_reshard_after_forward ? "true" : "false", c.tp_size,
      fmt::join(c.log_with, ", "), c.sanity_check ? "true" : "false", c.debug ? "true" : "false", c.timeout,
      name_in(fp8::kFormatNames, c.fp8_format), c.fp8_margin, c.fp8_amax_history_len,
      name_in(fp8::kAmaxAlgorithmNames, c.fp8_amax_compute_algo), c.fp8_include_first_last ? "true" : "false");
}

std::string ignored_keys_text(const ConfigFile& config) {
  return config.origin.ignored_keys.empty() ? "none" : fmt::format("{}", fmt::join(config.origin.ignored_keys, ", "));
}

void save_config(const ConfigFile& config, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("save_config: cannot write '{}'", path));
  out << to_yaml(config);
  if (!out) throw Error(fmt::format("save_config: writing '{}' failed", path));
}

}  // namespace accel
