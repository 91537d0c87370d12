// The accel config file: the answers of `accel config`, stored as YAML and read by `accel launch`
// and by the Accelerator (settings precedence: code, then ACCEL_* environment, then this file).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "autograd/fp8/delayed_scaling.h"
#include "autograd/mixed_precision.h"
#include "runtime/backend.h"

namespace accel {

// More processes or machines than any job has; the bound keeps the launcher's arithmetic in int.
inline constexpr int kMaxProcesses = 1 << 20;

// How a config file was written, kept for messages. It compares equal always: a config read from an
// Accelerate file and the same values written back in accel's format are the same config.
struct ConfigFileOrigin {
  // "accel" (accel's own keys, all checked), or "accelerate" (a Hugging Face Accelerate config,
  // recognised by its compute_environment or distributed_type key, read for the keys that mean
  // something here).
  std::string format = "accel";
  // An Accelerate file's keys that mean nothing here, as "key" or "block.key", in file order.
  std::vector<std::string> ignored_keys;
  bool operator==(const ConfigFileOrigin&) const { return true; }
};

// How long a collective may wait before the job is ended with a stall report (docs/debugging.md).
inline constexpr int kDefaultTimeoutSeconds = 600;
inline constexpr int kMaxTimeoutSeconds = 30 * 24 * 3600;

struct ConfigFile {
  // Where the job runs: "local" (this machine), "hosts" (several machines: hostfile or machine
  // flags), or "slurm" (inside a SLURM allocation).
  std::string environment = "local";
  int num_machines = 1;
  int num_processes = 1;  // in total, over all machines
  int machine_rank = 0;
  std::string main_process_ip;
  int main_process_port = 29500;
  std::string hostfile;
  MixedPrecision mixed_precision = MixedPrecision::no;
  int gradient_accumulation_steps = 1;
  bool use_cpu = false;
  Backend backend = Backend::automatic;
  // Sharded data parallelism (docs/zero.md), at most one of the two: a ZeRO stage 1-3 (0: none), or
  // an FSDP sharding strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD; "": none).
  int zero_stage = 0;
  std::string fsdp_sharding_strategy;
  // HYBRID_SHARD's ranks per shard group (0: the ranks of one node); HYBRID_SHARD only.
  int fsdp_hybrid_shard_size = 0;
  // Stage 3's units (FSDPPlugin's auto_wrap): module type names, and a minimum parameter count (0:
  // not used); both empty: every module that owns parameters.
  std::vector<std::string> fsdp_transformer_layer_cls_to_wrap;
  int64_t fsdp_min_num_params = 0;
  bool fsdp_reshard_after_forward = true;  // false: stage 3 keeps each unit gathered to its backward
  // Ranks per tensor-parallel group (docs/tensor_parallel.md); 1: none.
  int tp_size = 1;
  // Trackers (docs/tracking.md): jsonl, csv, tensorboard or all; empty: none.
  std::vector<std::string> log_with;
  // Debug mode: extra checks that cost time (the collectives' pre-checks); ACCEL_DEBUG for the ranks.
  bool debug = false;
  // Seconds a collective may take before the watchdog reports a stall and ends the job (ACCEL_TIMEOUT).
  int timeout = kDefaultTimeoutSeconds;
  // The first-step sanity report (key `sanity_check`); ACCEL_CHECK for the ranks.
  bool sanity_check = false;
  // mixed_precision fp8's recipe (ACCEL_FP8_* for the ranks): Transformer Engine's defaults.
  fp8::Format fp8_format = fp8::Format::hybrid;
  int fp8_margin = 0;
  int fp8_amax_history_len = 1024;
  fp8::AmaxAlgorithm fp8_amax_compute_algo = fp8::AmaxAlgorithm::max;
  bool fp8_include_first_last = false;

  // Where the values came from (not a value: two configs with the same values are equal).
  ConfigFileOrigin origin;

  bool operator==(const ConfigFile&) const = default;
};

// $ACCEL_CONFIG_FILE if set, else $XDG_CONFIG_HOME/accel/config.yaml, else ~/.config/accel/config.yaml.
std::string default_config_path();

// Parses YAML text. An unknown key or a bad value throws accel::Error naming the source, the key,
// the line and what was expected, e.g. "config.yaml:3: unknown key 'mixed_precison'". A file
// `accelerate config` wrote (runtime/accelerate_config.h) is read for its keys with a meaning here,
// its other keys kept in origin.ignored_keys.
ConfigFile parse_config(const std::string& yaml_text, const std::string& source_name);
ConfigFile load_config(const std::string& path);
// The YAML form, with one comment line per key saying what it means.
std::string to_yaml(const ConfigFile& config);
// An Accelerate file's ignored keys for a message: "a, b.c" in file order, or "none".
std::string ignored_keys_text(const ConfigFile& config);
// Writes to path, creating its directory.
void save_config(const ConfigFile& config, const std::string& path);
// Throws accel::Error when values contradict each other (machine_rank >= num_machines, ...).
void validate_config(const ConfigFile& config, const std::string& source_name);

}  // namespace accel
