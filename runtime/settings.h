// The Accelerator's settings: the options a program gives in code, and how each one is resolved
// against the ACCEL_* environment (set by `accel launch`), the config file and the defaults.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/fp8/delayed_scaling.h"
#include "autograd/mixed_precision.h"
#include "runtime/backend.h"
#include "runtime/parallelism_config.h"
#include "runtime/precision/loss_scaler.h"
#include "runtime/sharding_plugins.h"
#include "runtime/tracking/tracker.h"

namespace accel {

// A choice given in code: the enum value itself or the name a user would type, as Accelerate takes
// mixed_precision="bf16". A name is checked when the settings are resolved, so a bad one gets the
// same message as a bad environment variable.
template <class E>
class Choice {
 public:
  Choice(E value) : text_(name_of(value)) {}  // NOLINT: implicit, so that `o.backend = Backend::ring` reads
  Choice(const char* text) : text_(text) {}    // NOLINT: implicit, so that `o.backend = "ring"` reads
  Choice(std::string text) : text_(std::move(text)) {}  // NOLINT
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Where a project's checkpoints go (Accelerate's ProjectConfiguration).
struct ProjectConfiguration {
  std::string project_dir;                   // automatic checkpoints: project_dir/checkpoints/checkpoint_<n>
  bool automatic_checkpoint_naming = false;  // save_state() and load_state() with no directory
  int total_limit = 0;                       // automatic checkpoints kept (the newest), 0: all
  // Where the trackers write: logging_dir/<project_name>/ (init_trackers); empty: project_dir.
  std::string logging_dir{};  // (an initializer, so that designated initializers may leave it out)
};

// Settings given in code. Each one left empty falls back to its ACCEL_* environment variable (set by
// `accel launch`), then to the config file, then to the default.
struct AcceleratorOptions {
  std::optional<Choice<MixedPrecision>> mixed_precision;  // no, fp16, bf16 or fp8   (ACCEL_MIXED_PRECISION)
  // The dtype gradients are all-reduced in: "f32" (default), "compute" (the mixed_precision dtype), or
  // "f16"/"bf16", which must then be the compute dtype (ACCEL_GRAD_COMM_DTYPE).
  std::optional<Choice<GradCommDType>> grad_comm_dtype;
  // The dynamic loss scaler's settings; fp16 only (bf16 needs no scaling, and giving these with bf16
  // or no is rejected). Unset with fp16: the defaults (2^16, x2 after 2000 clean steps, x0.5).
  std::optional<LossScalerOptions> loss_scaler;
  // mixed_precision fp8's recipe (Accelerate's FP8RecipeKwargs): margin, amax history length and
  // algorithm, format, whether the first and last Linear run in fp8 too, and emulation on a GPU older
  // than sm_89. Given in code it is used whole; unset, each field comes from ACCEL_FP8_MARGIN,
  // ACCEL_FP8_AMAX_HISTORY_LEN, ACCEL_FP8_AMAX_COMPUTE_ALGO, ACCEL_FP8_FORMAT, ACCEL_FP8_INCLUDE_FIRST_LAST
  // and ACCEL_FP8_EMULATION, then the config file's fp8_* keys, then Transformer Engine's defaults.
  // fp8 only: giving it with another mixed_precision is rejected.
  std::optional<fp8::RecipeOptions> fp8_recipe;
  std::optional<bool> cpu;                         // train on the CPU even with GPUs   (ACCEL_USE_CPU)
  std::optional<int> gradient_accumulation_steps;  // (ACCEL_GRADIENT_ACCUMULATION_STEPS)
  std::optional<std::string> config_file;          // (ACCEL_CONFIG_FILE, else the default path)
  // Communicator between ranks: "auto" (mpi on the CPU), "mpi", "ring" (the teaching ring all-reduce
  // over MPI) or "nccl" (ACCEL_BACKEND, config file `backend`). Unused when there is one process.
  std::optional<Choice<Backend>> backend;
  // Gradient buckets fill up to this many MiB (ACCEL_BUCKET_CAP_MB; default 25). The first bucket
  // is capped at min(1, bucket_cap_mb) so the first all-reduce starts early.
  std::optional<double> bucket_cap_mb;
  // Make every op's result independent of the OpenMP thread count, at some cost in speed
  // (ACCEL_DETERMINISTIC=1; default off). It sets the process-wide switch of tensor/deterministic.h
  // when the Accelerator is built; docs/numerics.md says what it guarantees and what it costs.
  std::optional<bool> deterministic;
  // Debug mode (Accelerate's --debug): extra checks that cost time, such as the collectives' pre-checks
  // that every rank calls the same collective with matching shapes (ACCEL_DEBUG=1, config file
  // `debug`, `accel launch --debug`; default off).
  std::optional<bool> debug;
  // Seconds one collective may wait for the other ranks (ACCEL_TIMEOUT, config file `timeout`,
  // `accel launch --timeout`; default 600). Then a watchdog compares the ranks' ledgers, prints who
  // waits where, and ends the job (docs/debugging.md).
  std::optional<int> timeout;
  // The first-step sanity report (docs/debugging.md): after the first real optimizer step, the main
  // process names parameters that did not change or got no gradient, gradients that differ across
  // ranks, the dtypes in effect and what the optimizers hold (ACCEL_CHECK=1, config file
  // `sanity_check`, `accel launch --check`; default off). It costs a hash of every parameter and
  // gradient and one all-gather, once.
  std::optional<bool> check;
  // Record a timeline (docs/debugging.md, "Timeline"): every rank writes its Chrome trace events
  // (forward, backward, the optimizer step, data loading, checkpoint writes and every collective) to
  // DIR/accel_trace_rank<R>.json when its Accelerator ends, and `accel trace merge DIR OUT.json` makes one
  // file of them (ACCEL_TRACE=DIR, `accel launch --trace DIR`; default off). Not a config file key: a
  // property of one run.
  std::optional<std::string> trace_dir;
  // Sharded data parallelism (docs/zero.md): ZeRO stage 1, 2 or 3 through DeepSpeed's names, or FSDP's
  // sharding strategies (FULL_SHARD is stage 3, SHARD_GRAD_OP stage 2). At most one of the two
  // (ACCEL_ZERO_STAGE, ACCEL_FSDP_SHARDING_STRATEGY). Neither: plain data parallel.
  std::optional<DeepSpeedPlugin> deepspeed_plugin;
  std::optional<FSDPPlugin> fsdp_plugin;
  // Tensor parallelism, Megatron-LM style (docs/tensor_parallel.md): tp_size ranks share each layer,
  // and dp_size replicas of that group train on their own data (ACCEL_TP_SIZE, `accel launch
  // --tp_size N`, the config file's tp_size). Not given: tp_size 1, every rank a replica.
  std::optional<ParallelismConfig> parallelism_config;
  // How prepare() shards DataLoaders (see ShardOptions): pad the last steps so every rank runs as
  // many steps, and whether batch_size is the global batch split between the ranks.
  bool even_batches = true;
  bool split_batches = false;
  // A prepared LR scheduler counts only the optimizer steps that happened (not accumulation
  // micro-steps, not fp16-skipped steps), and each as num_processes steps unless split_batches: its
  // schedule is written for one process's batches. false: every scheduler.step() counts once.
  bool step_scheduler_with_optimizer = true;
  ProjectConfiguration project_configuration;
  // Trackers (docs/tracking.md): built-in names, "jsonl", "csv", "tensorboard" or "all", and the
  // user's Tracker objects, such as {"jsonl", std::make_shared<MyTracker>()}. The names, when code gives
  // any, stand for ACCEL_LOG_WITH (comma-separated) and the config file's log_with; Tracker objects
  // are always used.
  std::vector<TrackerChoice> log_with;
  // Print the effective settings once on the main process at start.
  bool print_settings = true;
  // Accelerator::print writes on the main process only (false), or once per machine, on each one's
  // local main process (true: what each machine's own log then shows).
  bool print_on_every_machine = false;
};

// One resolved setting and where it came from ("code", "environment ACCEL_...", "config file",
// "default").
template <class T>
struct Setting {
  T value{};
  std::string source;
};

// The fp8 recipe's fields, each with its source; read whatever mixed_precision is, used by fp8 only.
struct Fp8RecipeSettings {
  Setting<int> margin;
  Setting<int> amax_history_len;
  Setting<fp8::AmaxAlgorithm> amax_compute_algo;
  Setting<fp8::Format> format;
  Setting<bool> include_first_last;
  Setting<bool> allow_emulation;
  bool from_code = false;  // AcceleratorOptions::fp8_recipe was given

  fp8::RecipeOptions recipe() const;
  // The recipe's words and where they came from: "HYBRID, margin 0, ... (default)", the sources listed
  // once each, in field order.
  std::string describe() const;
};

struct EffectiveSettings {
  Setting<MixedPrecision> mixed_precision;
  Setting<GradCommDType> grad_comm_dtype;
  Setting<bool> cpu;
  Setting<int> gradient_accumulation_steps;
  Setting<Backend> backend;
  Setting<double> bucket_cap_mb;
  Setting<bool> deterministic;
  Setting<bool> debug;
  Setting<int> timeout;
  Setting<bool> check;
  Setting<std::string> trace_dir;  // "" when off
  Fp8RecipeSettings fp8;
  // OpenMP threads each op may use here (omp_get_max_threads when the settings were resolved), and
  // where the count came from ("environment OMP_NUM_THREADS" or "OpenMP default"). Not a setting
  // accel resolves: `accel launch` sets OMP_NUM_THREADS, the OpenMP runtime reads it. The start-up
  // line shows it after the strategy (describe() lists the resolved settings only).
  Setting<int> cpu_threads;
  // One line per ACCELERATE_* variable read in place of its ACCEL_* name; the Accelerator prints
  // them once per process on the main process.
  std::vector<std::string> alias_notes;
  // 0 (plain data parallel) to 3; from a DeepSpeedPlugin's zero_stage or an FSDPPlugin's strategy.
  Setting<int> zero_stage;
  std::string sharding_via;  // "deepspeed", "fsdp", or "" with neither
  std::optional<ShardingStrategy> fsdp_strategy;  // the FSDP strategy asked for, if any
  Setting<AutoWrapPolicy> auto_wrap;  // stage 3's units
  // Stage 3 frees each unit's gathered parameters after its forward (true) or keeps them to its
  // backward (false: one all-gather per unit fewer, the memory of the gathered units more).
  Setting<bool> reshard_after_forward{true, "default"};
  // FSDP's HYBRID_SHARD: stage 3 within each shard group, replicated across the groups; and its ranks
  // per shard group (0: the ranks of one node).
  bool hybrid_shard = false;
  Setting<int> hybrid_shard_size;
  // Ranks per tensor-parallel group (1: none), and the data-parallel replicas asked for in code (0:
  // the world size / tp_size, known once the ranks are up).
  Setting<int> tp_size;
  int dp_size = 0;
  // The built-in trackers, "all" expanded (code, ACCEL_LOG_WITH, config file, or none by default),
  // and the names of the user's Tracker objects.
  Setting<std::vector<std::string>> log_with;
  std::vector<std::string> user_trackers;
  std::string config_path;  // empty when no config file was read
  std::string describe() const;  // one line for the start-up print
};

// Resolves each setting: code, then environment, then config file, then default.
EffectiveSettings resolve_settings(const AcceleratorOptions& options, const std::map<std::string, std::string>& env);

}  // namespace accel
