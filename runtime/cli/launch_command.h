// `accel launch [options] PROGRAM [ARGS...]`: the command-line side of launching (its flags, their
// precedence over the config file, the program and its arguments); the launch itself is launch.h.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "runtime/cli/launch.h"

namespace accel {

class LaunchCommand {
 public:
  // Adds `launch` and its options to app; the values land in this object, which must outlive parsing.
  explicit LaunchCommand(CLI::App& app);
  // The request the parsed command line makes: the config file first, then the flags. after_separator
  // is what followed `--` (the program's, unparsed); self_path is this executable.
  LaunchRequest request(const std::vector<std::string>& after_separator, const std::string& self_path) const;
  bool dry_run() const { return dry_run_; }

 private:
  // --use_deepspeed / --zero_stage and --use_fsdp / --fsdp_sharding_strategy / --fsdp_hybrid_shard_size
  // and the stage 3 flags (auto-wrap, reshard after forward), over the config file's.
  void apply_sharding_flags(ConfigFile& config) const;
  void apply_auto_wrap_flags(ConfigFile& config) const;
  void apply_reshard_flag(ConfigFile& config) const;
  // --main_process_port over the config file's; 0 picks a free port (on machine 0 only).
  void apply_port(LaunchRequest& request) const;
  // Accelerate's words with no effect here, and the Accelerate config's ignored keys, as notes.
  void add_notes(LaunchRequest& request, const std::string& config_path) const;
  CLI::App* launch_ = nullptr;
  std::string config_path_, hostfile_, main_ip_, precision_, mpirun_args_, fsdp_strategy_, log_with_;
  int num_processes_ = 0, num_machines_ = 0, machine_rank_ = -1, port_ = -1, accumulation_ = 0;
  int cpu_threads_ = 0;
  int timeout_ = 0;  // 0: not given
  // fp8's recipe, Accelerate's flag names; empty or -1: not given.
  std::string fp8_format_, fp8_amax_compute_algo_;
  int fp8_margin_ = -1, fp8_amax_history_len_ = -1;
  double rendezvous_timeout_ = 300;
  bool cpu_ = false, dry_run_ = false, use_deepspeed_ = false, use_fsdp_ = false;
  bool multi_gpu_ = false, module_ = false, quiet_ = false, debug_ = false, check_ = false;
  std::string trace_dir_;
  int zero_stage_ = -1;
  int hybrid_shard_size_ = -1;  // --fsdp_hybrid_shard_size; -1: not given
  // Stage 3's units, Accelerate's flags; empty or 0: not given.
  std::string auto_wrap_policy_, wrap_types_;
  int min_num_params_ = 0;
  std::string reshard_after_forward_;  // --fsdp_reshard_after_forward; empty: not given
  int tp_size_ = 0;
};

}  // namespace accel
