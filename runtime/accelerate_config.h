// Reading the config file that Hugging Face's `accelerate config` writes: it is recognised by its
// compute_environment or distributed_type key (keys accel's own format does not have), and turned
// into accel's keys, so the same checks and messages apply; the keys with no meaning here are listed.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace accel {

// Whether root (a mapping) is an Accelerate config: it has compute_environment or distributed_type.
bool is_accelerate_config(const YAML::Node& root);

struct AccelerateTranslation {
  YAML::Node accel_keys;                  // a mapping of accel config keys to the file's value nodes
  std::vector<std::string> ignored_keys;  // "key" or "block.key", in file order
};

// Reads num_processes, num_machines, machine_rank, main_process_ip, main_process_port, use_cpu,
// mixed_precision, debug and gradient_accumulation_steps; deepspeed_config.zero_stage (and its
// gradient_accumulation_steps) when distributed_type is DEEPSPEED; fsdp_config.fsdp_sharding_strategy
// (a name or Accelerate's 1-4; FSDP2's fsdp_reshard_after_forward true/false as FULL_SHARD/SHARD_GRAD_OP)
// when it is FSDP; fp8_config's fp8_format, margin, amax_history_len (or _length) and amax_compute_algo
// (or _algorithm) as accel's fp8_* keys, with backend TE and interval 1 the only values accepted. null
// values count as absent; every other key is ignored and listed. A key twice, a
// compute_environment other than LOCAL_MACHINE, or a distributed_type accel has no equivalent for
// (TPU, XLA, MEGATRON_LM, other device types) throws accel::Error naming the file, line and value.
AccelerateTranslation translate_accelerate_config(const YAML::Node& root, const std::string& source);

}  // namespace accel
