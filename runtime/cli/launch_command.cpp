// LaunchCommand: accel launch's options, and the request they make over the config file.
#include "runtime/cli/launch_command.h"

#include <fmt/format.h>


#include <cstdlib>
#include <filesystem>

#include "kernels/error.h"
#include "runtime/accelerate_names.h"
#include "runtime/cli/free_port.h"
#include "runtime/config_file.h"
#include "runtime/sharding_plugins.h"
#include "runtime/tracking/tracker_names.h"

namespace accel {

LaunchCommand::LaunchCommand(CLI::App& app) {
  launch_ = app.add_subcommand("launch", "Start PROGRAM on every rank through mpirun");
  launch_->add_option("--config_file", config_path_, "Config file (default: the one `accel config` wrote)");
  launch_->add_option("-n,--num_processes", num_processes_, "Processes in total")->check(CLI::PositiveNumber);
  launch_->add_option("--num_machines", num_machines_, "Machines")->check(CLI::PositiveNumber);
  launch_->add_option("--machine_rank", machine_rank_, "This machine's index")->check(CLI::NonNegativeNumber);
  launch_->add_option("--main_process_ip", main_ip_, "Address of machine 0");
  launch_->add_option("--main_process_port", port_, "Port on machine 0; 0 picks a free one (machine 0 only)")
      ->check(CLI::Range(0, 65535));
  launch_->add_option("--hostfile,--mpirun_hostfile", hostfile_,
                      "Open MPI hostfile (--mpirun_hostfile: Accelerate's name)");
  launch_->add_option("--mpirun_args,--mpirun-args", mpirun_args_,
                      "Extra mpirun options, one string split like a shell line (e.g. \"--mca btl tcp,self\")")
      ->envname("ACCEL_MPIRUN_ARGS");
  launch_->add_option("--rendezvous_timeout", rendezvous_timeout_,
                      "Seconds machine 0 waits for the other machines, and they for it (machine flags)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  launch_->add_option("--mixed_precision", precision_, available_choices(kMixedPrecisionNames))
      ->check(CLI::IsMember(available_names(kMixedPrecisionNames)));
  launch_->add_option("--fp8_format", fp8_format_,
                      "With fp8: " + available_choices(fp8::kFormatNames) + " (default HYBRID)")
      ->check(CLI::IsMember(available_names(fp8::kFormatNames)));
  launch_->add_option("--fp8_margin", fp8_margin_, "With fp8: scale = fp8_max / amax / 2^margin (default 0)")
      ->check(CLI::Range(0, 64));
  launch_->add_option("--fp8_amax_history_len", fp8_amax_history_len_,
                      "With fp8: steps of amax kept per tensor (default 1024)")
      ->check(CLI::Range(1, 1 << 24));
  launch_->add_option("--fp8_amax_compute_algo", fp8_amax_compute_algo_,
                      "With fp8: " + available_choices(fp8::kAmaxAlgorithmNames) + " (default max)")
      ->check(CLI::IsMember(available_names(fp8::kAmaxAlgorithmNames)));
  launch_->add_flag("--cpu", cpu_, "Train on the CPU even when GPUs are present");
  launch_->add_option("--gradient_accumulation_steps", accumulation_, "Micro-batches per optimizer step")
      ->check(CLI::PositiveNumber);
  // Accelerate's flag names for sharded data parallelism (docs/zero.md).
  launch_->add_flag("--use_deepspeed", use_deepspeed_, "ZeRO: shard optimizer state (and grads, parameters)");
  launch_->add_option("--zero_stage", zero_stage_, "ZeRO stage with --use_deepspeed: 0-3 (default 2)")
      ->check(CLI::Range(0, 3));
  launch_->add_flag("--use_fsdp", use_fsdp_, "FSDP: shard parameters, grads and optimizer state");
  launch_->add_option("--fsdp_sharding_strategy", fsdp_strategy_,
                      "With --use_fsdp: " + available_choices(kShardingStrategyNames) + " (default FULL_SHARD)")
      ->check(CLI::IsMember(available_names(kShardingStrategyNames)));
  launch_->add_option("--fsdp_hybrid_shard_size", hybrid_shard_size_,
                      "With --fsdp_sharding_strategy HYBRID_SHARD: ranks per shard group, dividing the process "
                      "count (default: the ranks of one machine)")
      ->check(CLI::NonNegativeNumber);
  launch_->add_option("--fsdp_auto_wrap_policy", auto_wrap_policy_,
                      "With --use_fsdp: TRANSFORMER_BASED_WRAP (with --fsdp_transformer_layer_cls_to_wrap) or "
                      "SIZE_BASED_WRAP (with --fsdp_min_num_params); accepted for Accelerate's command lines, the "
                      "two flags decide")
      ->check(CLI::IsMember({"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}));
  launch_->add_option("--fsdp_transformer_layer_cls_to_wrap", wrap_types_,
                      "With --use_fsdp: module types (comma-separated, e.g. GPTBlock) that become stage 3 units");
  launch_->add_option("--fsdp_min_num_params", min_num_params_,
                      "With --use_fsdp: modules of at least this many parameters become stage 3 units")
      ->check(CLI::PositiveNumber);
  launch_->add_option("--fsdp_reshard_after_forward", reshard_after_forward_,
                      "With stage 3: true frees each unit's gathered parameters after its forward (the default), "
                      "false keeps them to its backward (fewer all-gathers, more memory)");
  // Accelerate's ParallelismConfig field, under the flag name its launcher takes too.
  launch_->add_option("--tp_size,--parallelism_config_tp_size", tp_size_,
                      "Tensor parallelism: ranks per group sharing each layer; divides the process count "
                      "(docs/tensor_parallel.md)")
      ->check(CLI::PositiveNumber);
  launch_->add_option("--log_with", log_with_, "Trackers, comma-separated: jsonl, csv, tensorboard, all (docs/tracking.md)");
  launch_->add_flag("--dry-run,--dry_run", dry_run_, "Print the mpirun command line instead of running it");
  launch_->add_option("--num_cpu_threads_per_process", cpu_threads_,
                      "OMP_NUM_THREADS for every rank (default: your OMP_NUM_THREADS, else usable CPUs / ranks "
                      "per machine)")
      ->check(CLI::PositiveNumber);
  launch_->add_option("--timeout", timeout_, "Seconds a collective may wait for the others before the job ends "
                      "with a report of where each rank is (default 600)")
      ->check(CLI::Range(1, kMaxTimeoutSeconds));
  launch_->add_flag("--debug", debug_, "Debug mode for every rank (ACCEL_DEBUG=1): the collectives' pre-checks");
  launch_->add_flag("--check", check_,
                    "The first-step sanity report (ACCEL_CHECK=1): after the first optimizer step, parameters that did "
                    "not change or got no gradient, gradients that differ across ranks, the dtypes, what the "
                    "optimizers hold");
  launch_->add_option("--trace", trace_dir_,
                      "Record every rank's timeline in DIR (ACCEL_TRACE), then merge it into DIR/trace.json, draw the "
                      "last step in DIR/step.svg and print the straggler summary");
  launch_->add_flag("-q,--quiet", quiet_, "No notes from accel launch itself (the ranks' output is unchanged)");
  // Accelerate's words that mean nothing more here, accepted so its command lines run.
  launch_->add_flag("--multi_gpu", multi_gpu_, "Accepted for Accelerate's command lines: the GPU count decides");
  launch_->add_flag("-m,--module", module_, "Accelerate's 'run a Python module': not applicable (an error)");
  // Everything from PROGRAM on belongs to the program, flags included.
  launch_->prefix_command();
  launch_->footer("PROGRAM [ARGS...] follow the options; everything from PROGRAM on is passed to it unchanged.");
}

void LaunchCommand::apply_sharding_flags(ConfigFile& c) const {
  if (use_deepspeed_ && use_fsdp_)
    throw Error("accel launch: --use_deepspeed and --use_fsdp are two ways to shard; give one");
  if (zero_stage_ >= 0 && !use_deepspeed_)
    throw Error(fmt::format("accel launch: --zero_stage {} needs --use_deepspeed", zero_stage_));
  if (!fsdp_strategy_.empty() && !use_fsdp_)
    throw Error(fmt::format("accel launch: --fsdp_sharding_strategy {} needs --use_fsdp", fsdp_strategy_));
  if (use_deepspeed_) {
    c.zero_stage = zero_stage_ >= 0 ? zero_stage_ : 2;  // DeepSpeedPlugin's default
    c.fsdp_sharding_strategy.clear();
    c.fsdp_hybrid_shard_size = 0;
    c.fsdp_transformer_layer_cls_to_wrap.clear();
    c.fsdp_min_num_params = 0;
    if (c.zero_stage != 3) c.fsdp_reshard_after_forward = true;
  }
  if (use_fsdp_) {
    c.fsdp_sharding_strategy = fsdp_strategy_.empty() ? "FULL_SHARD" : fsdp_strategy_;
    c.zero_stage = 0;
    if (!is_hybrid(c.fsdp_sharding_strategy)) c.fsdp_hybrid_shard_size = 0;
    // The config file's units belong to its stage 3; a flag's other strategy has none.
    if (zero_stage_of(*value_in(kShardingStrategyNames, c.fsdp_sharding_strategy)) != 3) {
      c.fsdp_transformer_layer_cls_to_wrap.clear();
      c.fsdp_min_num_params = 0;
      c.fsdp_reshard_after_forward = true;
    }
  }
  if (hybrid_shard_size_ >= 0) {
    if (!is_hybrid(c.fsdp_sharding_strategy))
      throw Error(fmt::format("accel launch: --fsdp_hybrid_shard_size {} needs --use_fsdp --fsdp_sharding_strategy "
                              "HYBRID_SHARD (or HYBRID_SHARD_ZERO2), but the sharding strategy is '{}'",
                              hybrid_shard_size_, c.fsdp_sharding_strategy));
    c.fsdp_hybrid_shard_size = hybrid_shard_size_;
  }
  apply_auto_wrap_flags(c);
  apply_reshard_flag(c);
}

void LaunchCommand::apply_auto_wrap_flags(ConfigFile& c) const {
  if (auto_wrap_policy_.empty() && wrap_types_.empty() && min_num_params_ == 0) return;
  const std::optional<ShardingStrategy> fsdp = value_in(kShardingStrategyNames, c.fsdp_sharding_strategy);
  if (!fsdp || zero_stage_of(*fsdp) != 3)
    throw Error(fmt::format("accel launch: --fsdp_auto_wrap_policy, --fsdp_transformer_layer_cls_to_wrap and "
                            "--fsdp_min_num_params choose stage 3's units; they need --use_fsdp with FULL_SHARD or "
                            "HYBRID_SHARD, but the sharding strategy is '{}'",
                            c.fsdp_sharding_strategy));
  // Accelerate's policy names the flag that carries the units; here the flags themselves decide.
  if (auto_wrap_policy_ == "NO_WRAP")
    throw Error("accel launch: --fsdp_auto_wrap_policy NO_WRAP has no equivalent here: stage 3 always makes units "
                "(by default every module that owns parameters); give --fsdp_transformer_layer_cls_to_wrap or "
                "--fsdp_min_num_params");
  if (auto_wrap_policy_ == "TRANSFORMER_BASED_WRAP" && wrap_types_.empty())
    throw Error("accel launch: --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP needs "
                "--fsdp_transformer_layer_cls_to_wrap (the module types, e.g. GPTBlock)");
  if (auto_wrap_policy_ == "SIZE_BASED_WRAP" && min_num_params_ == 0)
    throw Error("accel launch: --fsdp_auto_wrap_policy SIZE_BASED_WRAP needs --fsdp_min_num_params");
  if (!wrap_types_.empty()) {
    const std::optional<std::vector<std::string>> names = parse_module_types(wrap_types_);
    if (!names)
      throw Error(
          fmt::format("accel launch: --fsdp_transformer_layer_cls_to_wrap '{}' must be {}", wrap_types_, kModuleTypesExpected));
    c.fsdp_transformer_layer_cls_to_wrap = *names;
  }
  if (min_num_params_ > 0) c.fsdp_min_num_params = min_num_params_;
}

void LaunchCommand::apply_reshard_flag(ConfigFile& c) const {
  if (reshard_after_forward_.empty()) return;
  const std::optional<bool> on = accelerate_switch(reshard_after_forward_);
  if (!on)
    throw Error(fmt::format("accel launch: --fsdp_reshard_after_forward '{}' must be true or false (the sharding "
                            "strategy is --fsdp_sharding_strategy)",
                            reshard_after_forward_));
  const std::optional<ShardingStrategy> fsdp = value_in(kShardingStrategyNames, c.fsdp_sharding_strategy);
  if (!*on && c.zero_stage != 3 && !(fsdp && zero_stage_of(*fsdp) == 3))
    throw Error(fmt::format("accel launch: --fsdp_reshard_after_forward false is for stage 3, whose parameters are "
                            "sharded; it needs --use_fsdp with FULL_SHARD or HYBRID_SHARD (or --use_deepspeed "
                            "--zero_stage 3), but the sharding strategy is '{}', zero_stage {}",
                            c.fsdp_sharding_strategy, c.zero_stage));
  if (*on && fsdp == ShardingStrategy::hybrid_shard_zero2)
    throw Error("accel launch: --fsdp_reshard_after_forward true contradicts --fsdp_sharding_strategy "
                "HYBRID_SHARD_ZERO2, which keeps the units gathered from forward to backward; give HYBRID_SHARD");
  c.fsdp_reshard_after_forward = *on;
}

LaunchRequest LaunchCommand::request(const std::vector<std::string>& after_separator,
                                     const std::string& self_path) const {
  LaunchRequest request;
  const std::string path = config_path_.empty() ? default_config_path() : config_path_;
  if (!config_path_.empty() || std::filesystem::exists(path)) request.config = load_config(path);
  ConfigFile& c = request.config;
  if (num_processes_) c.num_processes = num_processes_;
  if (num_machines_) c.num_machines = num_machines_;
  if (machine_rank_ >= 0) c.machine_rank = machine_rank_;
  if (!main_ip_.empty()) c.main_process_ip = main_ip_;
  if (!hostfile_.empty()) c.hostfile = hostfile_;
  if (!precision_.empty()) c.mixed_precision = *value_in(kMixedPrecisionNames, precision_);
  if (!fp8_format_.empty()) c.fp8_format = *value_in(fp8::kFormatNames, fp8_format_);
  if (fp8_margin_ >= 0) c.fp8_margin = fp8_margin_;
  if (fp8_amax_history_len_ >= 0) c.fp8_amax_history_len = fp8_amax_history_len_;
  if (!fp8_amax_compute_algo_.empty())
    c.fp8_amax_compute_algo = *value_in(fp8::kAmaxAlgorithmNames, fp8_amax_compute_algo_);
  if (cpu_) c.use_cpu = true;
  if (accumulation_) c.gradient_accumulation_steps = accumulation_;
  if (debug_) c.debug = true;
  if (timeout_ > 0) c.timeout = timeout_;
  if (check_) c.sanity_check = true;
  apply_sharding_flags(c);
  if (tp_size_) c.tp_size = tp_size_;
  if (c.num_processes % c.tp_size != 0)
    throw Error(fmt::format("accel launch: tp_size {} does not divide the {} processes", c.tp_size, c.num_processes));
  // Under tensor parallelism a shard group is made of data-parallel ranks.
  const int dp = c.num_processes / c.tp_size;
  if (c.fsdp_hybrid_shard_size > 0 && dp % c.fsdp_hybrid_shard_size != 0)
    throw Error(fmt::format("accel launch: fsdp_hybrid_shard_size {} does not divide the {} processes{}",
                            c.fsdp_hybrid_shard_size, c.num_processes,
                            c.tp_size == 1 ? "" : fmt::format(" over tp_size {} ({})", c.tp_size, dp)));
  if (!log_with_.empty()) {
    const std::optional<std::vector<std::string>> trackers = parse_tracker_list(log_with_);
    if (!trackers)
      throw Error(fmt::format("accel launch: --log_with '{}' is not valid; expected a comma-separated list of {}",
                              log_with_, tracker_choices()));
    c.log_with = *trackers;
  }
  if (c.num_machines > 1 && c.environment == "local") c.environment = "hosts";
  apply_port(request);
  if (module_)
    throw Error("accel launch: -m/--module runs a Python module (python -m); that is not applicable to C++ programs: "
                "give the program's executable, as in accel launch [options] ./build/train [ARGS...]");
  std::vector<std::string> command = launch_->remaining();
  command.insert(command.end(), after_separator.begin(), after_separator.end());
  if (command.empty()) throw Error("accel launch: no program given; usage: accel launch [options] PROGRAM [ARGS...]");
  if (command.front().size() > 1 && command.front()[0] == '-')
    throw Error(fmt::format("accel launch: unknown option '{}' (see accel launch --help)", command.front()));
  request.program = command.front();
  request.program_args.assign(command.begin() + 1, command.end());
  request.self_path = self_path;
  request.mpirun_args = split_arguments(mpirun_args_, "--mpirun_args");
  request.rendezvous_timeout_s = rendezvous_timeout_;
  request.num_cpu_threads_per_process = cpu_threads_;
  if (const char* threads = std::getenv("OMP_NUM_THREADS"); threads != nullptr) request.user_omp_num_threads = threads;
  request.quiet = quiet_;
  if (!trace_dir_.empty()) request.trace_dir = std::filesystem::absolute(trace_dir_).string();
  add_notes(request, path);
  return request;
}

void LaunchCommand::apply_port(LaunchRequest& request) const {
  ConfigFile& c = request.config;
  if (port_ < 0) return;
  request.export_main_process_port = true;
  if (port_ > 0) {
    c.main_process_port = port_;
    return;
  }
  if (c.machine_rank > 0)
    throw Error(fmt::format("accel launch: --main_process_port 0 picks a free port on machine 0; machine {} must be "
                            "given the port machine 0 printed",
                            c.machine_rank));
  c.main_process_port = pick_free_port(c.main_process_ip);
  request.notes.push_back(fmt::format("accel launch: --main_process_port 0: using port {}", c.main_process_port));
}

void LaunchCommand::add_notes(LaunchRequest& request, const std::string& config_path) const {
  if (multi_gpu_)
    request.notes.emplace_back("accel launch: --multi_gpu has nothing to switch on: each rank takes GPU local_rank "
                               "% count when there are GPUs (the device count decides), the CPU otherwise");
  const ConfigFile& c = request.config;
  if (c.origin.format == "accelerate")
    request.notes.push_back(fmt::format("accel launch: {} is an Accelerate config; ignored (no meaning in accel): {}",
                                        config_path, ignored_keys_text(c)));
}

}  // namespace accel
