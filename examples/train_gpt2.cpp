// train_gpt2: GPT-2 trained through the Accelerator, the way a program embeds accel: llm.c token shards
// in, an llm.c or Hugging Face weights file (or GPT-2's init) to start from, one parseable line per
// step, and the final model written back in both formats. The same binary runs on one CPU, under
// `accel launch -n N` with any strategy and precision, and on GPUs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include <accel.h>

#include "checkpoint_flags.h"
#include "op_time_table.h"
#include "sample_tokens.h"
#include "tracking_flags.h"

using namespace accel;

namespace {

struct TrainFlags {
  std::string init_from, model = "d12", train_data, val_data, tokenizer, save_format = "both";
  int64_t batch_size = 4, seq_len = 64, total_batch_size = 0, steps = 10, warmup_steps = 0;
  double lr = 3e-4, final_lr_fraction = 0.0, weight_decay = 0.0, grad_clip = 1.0;
  std::string lr_schedule = "cosine";
  int64_t val_every = 0, val_steps = 20, sample_every = 0, sample_tokens = 64;
  uint64_t seed = 0;
  bool shuffle = false, profile_ops = false;

  void add_to(CLI::App& app) {
    auto* init = app.add_option("--init_from", init_from,
                                "Start from this weights file: llm.c's gpt2_*.bin or transformers' model.safetensors "
                                "(told apart by content)");
    app.add_option("--model", model, "Without --init_from: GPT-2 of this depth from GPT-2's init (d12 = 124M, d24 = "
                                     "350M, d36 = 774M, d48 = 1558M)")
        ->check(CLI::IsMember({"d12", "d24", "d36", "d48"}))
        ->excludes(init)
        ->capture_default_str();
    app.add_option("--train_data", train_data, "llm.c token shards to train on (a glob: 'train_*.bin')")->required();
    app.add_option("--val_data", val_data, "llm.c token shards for the validation loss (a glob)");
    app.add_option("--batch_size", batch_size, "Sequences per micro-batch, per data-parallel rank (B)")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--seq_len", seq_len, "Tokens per sequence (T), at most the model's context")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--total_batch_size", total_batch_size,
                   "Tokens per optimizer step over every rank; gradient accumulation = it / (B * T * ranks) "
                   "(0: one micro-batch)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--steps", steps, "Optimizer steps")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lr", lr, "Peak learning rate of AdamW (betas 0.9, 0.95, eps 1e-8, as llm.c)")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--lr_schedule", lr_schedule, "After the warmup: cosine down to lr * final_lr_fraction, or constant")
        ->check(CLI::IsMember({"cosine", "constant"}))->capture_default_str();
    app.add_option("--warmup_steps", warmup_steps, "Steps of linear warmup")->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--final_lr_fraction", final_lr_fraction, "Where the cosine ends, as a fraction of lr")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    app.add_option("--weight_decay", weight_decay, "AdamW weight decay of the 2-D weights (biases and LayerNorms: none)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--grad_clip", grad_clip, "Clip the global gradient norm to this (0: no clipping)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--val_every", val_every, "Print the validation loss every N steps and after the last (0: never)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--val_steps", val_steps, "Micro-batches per validation")->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--sample_every", sample_every, "Sample from the model every N steps and after the last (0: never)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--sample_tokens", sample_tokens, "Tokens per sample")->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--tokenizer", tokenizer, "llm.c's gpt2_tokenizer.bin, to print samples as text (else as token ids)");
    app.add_option("--seed", seed, "Seed of GPT-2's init, the shuffle and the samples")->capture_default_str();
    app.add_flag("--profile_ops", profile_ops,
                 "After the run, print where a step's time went: matmuls, attention, layer_norm, gelu, cross-entropy, "
                 "the optimizer and the rest (CPU ops; the first step is left out as warm-up)");
    app.add_flag("--shuffle", shuffle, "Shuffle the shards and their batches each epoch (default: in order, as llm.c)");
    app.add_option("--save_format", save_format,
                   "With --output_dir, the final model as DIR/model.bin (llmc), DIR/model.safetensors, or both")
        ->check(CLI::IsMember({"llmc", "safetensors", "both"}))->capture_default_str();
  }

  double lr_at(int64_t step) const {
    if (lr_schedule == "constant") return optim::linear_warmup_lr(lr, warmup_steps, step);
    return optim::cosine_lr(lr, lr * final_lr_fraction, warmup_steps, steps, step);
  }
};

// GPT-2 as the file describes it and with its weights, or of the depth asked for from GPT-2's init.
std::shared_ptr<nn::GPT> make_model(const TrainFlags& flags) {
  Generator gen(flags.seed);
  if (flags.init_from.empty()) return std::make_shared<nn::GPT>(nn::GPTConfig::gpt2(std::stoi(flags.model.substr(1))), gen);
  auto model = std::make_shared<nn::GPT>(gpt2_config_of_file(flags.init_from), gen);
  load_gpt2_weights(*model, flags.init_from);
  return model;
}

// AdamW as GPT-2 and llm.c run it: weight decay on the 2-D weights (the embeddings and every Linear's
// matrix), none on biases and LayerNorm gains.
std::shared_ptr<optim::AdamW> make_optimizer(const nn::GPT& model, const TrainFlags& flags) {
  optim::ParamGroup decayed{{}, {{"weight_decay", flags.weight_decay}}}, plain{{}, {{"weight_decay", 0.0}}};
  for (const Tensor& p : model.parameters()) (p.dim() == 2 ? decayed : plain).params.push_back(p);
  return std::make_shared<optim::AdamW>(
      std::vector<optim::ParamGroup>{decayed, plain},
      optim::AdamWOptions{.lr = flags.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.0});
}

int64_t counted_targets(const Tensor& targets, int64_t ignore_index) {
  int64_t n = 0;
  for (const int64_t t : targets.to_vector<int64_t>()) n += t != ignore_index;
  return n;
}

constexpr int64_t kIgnoreIndex = -100;

Tensor sum_loss(nn::GPT& model, const llmc::TokenBatch& batch, const Accelerator& accelerator) {
  auto autocast = accelerator.autocast();  // matmuls in the compute dtype, softmax and the loss in f32
  // GPT::loss: under tensor parallelism the vocab-parallel loss, with no rank holding all the logits.
  return model.loss(to(batch.inputs, accelerator.device()), to(batch.targets, accelerator.device()), kIgnoreIndex,
                    Reduction::sum);
}

// The mean loss over steps micro-batches from the loader's start, over every data-parallel rank.
double validate(nn::GPT& model, llmc::TokenShardLoader& loader, int64_t steps, Accelerator& accelerator) {
  NoGradGuard no_grad;
  model.eval();
  loader.reset();
  double sum = 0, count = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const llmc::TokenBatch batch = loader.next_batch();
    sum += sum_loss(model, batch, accelerator).item();
    count += static_cast<double>(counted_targets(batch.targets, kIgnoreIndex));
  }
  model.train();
  const std::vector<double> total = accelerator.reduce(from_vector(std::vector<double>{sum, count})).to_vector<double>();
  return total[1] > 0 ? total[0] / total[1] : 0.0;
}

// Draws count tokens one at a time after start_id, at temperature 1. Every rank runs it (a sharded
// model's forward is collective) with the same generator, so every rank draws the same tokens.
std::vector<int64_t> sample(nn::GPT& model, int64_t start_id, int64_t count, Generator& gen,
                            const Accelerator& accelerator) {
  auto autocast = accelerator.autocast();
  model.eval();
  std::vector<int64_t> ids = sample_tokens(model, start_id, count, 1.0, gen, accelerator.device());
  model.train();
  return ids;
}

std::string show_sample(const std::vector<int64_t>& ids, const std::optional<llmc::Gpt2Tokenizer>& tokenizer) {
  if (tokenizer) return tokenizer->decode(ids);
  return fmt::format("{}", fmt::join(ids, " "));
}

// The final model, whole (gathered where a strategy shards it), written by the main process into dir.
void save_final_model(Accelerator& accelerator, const nn::GPT& model, const std::string& dir, const std::string& format) {
  const nn::StateDict state = accelerator.get_state_dict(model);  // collective
  if (accelerator.is_main_process()) {
    Generator gen(0);
    nn::GPT whole(model.config(), gen);  // on the host, from the gathered state
    whole.load_state_dict(state);
    std::filesystem::create_directories(dir);
    const std::filesystem::path out(dir);
    if (format != "safetensors") llmc::save_llmc_gpt2(whole, (out / "model.bin").string());
    if (format != "llmc") save_hf_gpt2(whole, (out / "model.safetensors").string());
    accelerator.print(fmt::format("saved the model to {} ({})", dir, format == "both" ? "model.bin, model.safetensors"
                                                                   : format == "llmc" ? "model.bin" : "model.safetensors"));
  }
  accelerator.wait_for_everyone();
}

int64_t parameter_count(const nn::GPT& model) {
  int64_t n = 0;
  for (const Tensor& p : model.parameters()) n += p.numel();
  return n;
}

// The step's FLOPs per token, as llm.c counts them: 6 per parameter (forward and backward) and the
// attention's 12 L C T.
double flops_per_token(const nn::GPT& model, int64_t seq_len) {
  const nn::GPTConfig& c = model.config();
  return 6.0 * static_cast<double>(parameter_count(model)) + 12.0 * static_cast<double>(c.n_layer * c.n_embd * seq_len);
}

// What a run holds between its steps.
struct Run {
  Accelerator& accelerator;
  const TrainFlags& flags;
  std::shared_ptr<nn::GPT> net;
  std::shared_ptr<optim::AdamW> opt;
  llmc::TokenShardLoader train;
  std::optional<llmc::TokenShardLoader> val;
  std::optional<llmc::Gpt2Tokenizer> tokenizer;
  int64_t accumulation = 1;
  int64_t tokens_per_step = 0;  // over every data-parallel rank
  double flops_per_token = 0;
  MatmulRate rate;
  Generator sample_gen;
};

struct StepResult {
  double loss = 0;  // the mean over every target token of the step, on every rank
  double norm = 0;  // the gradient norm before clipping (0 when not clipping)
};

// One optimizer step: a window of micro-batches whose loss is normalised by the window's global token
// count, so the update follows the gradient of the global mean (Accelerator::num_items).
StepResult train_step(Run& r) {
  Accelerator& accelerator = r.accelerator;
  std::vector<llmc::TokenBatch> window;
  int64_t local_count = 0;
  for (int64_t m = 0; m < r.accumulation; ++m) {
    window.push_back(r.train.next_batch());
    local_count += counted_targets(window.back().targets, kIgnoreIndex);
  }
  const int64_t num_items = accelerator.num_items(local_count);
  r.opt->zero_grad();
  double local_sum = 0;
  for (int64_t m = 0; m < r.accumulation; ++m) {
    const Tensor sum = sum_loss(*r.net, window[static_cast<size_t>(m)], accelerator);
    const Tensor loss = accelerator.scale_sum_loss(sum, num_items);
    if (m + 1 < r.accumulation) {
      auto scope = accelerator.no_sync();  // the grads add up locally; the window's last backward syncs
      accelerator.backward(loss);
    } else {
      accelerator.backward(loss);
    }
    local_sum += sum.item();
  }
  StepResult result;
  if (r.flags.grad_clip > 0) result.norm = accelerator.clip_grad_norm(*r.net, r.flags.grad_clip);
  r.opt->step();
  // Every rank of a tensor-parallel group holds its replica's sum: count each replica's once.
  const double copies = static_cast<double>(accelerator.num_processes() / accelerator.strategy().data_shard().world_size);
  const double total =
      accelerator.reduce(from_vector(std::vector<double>{local_sum})).to_vector<double>()[0] / copies;
  result.loss = num_items > 0 ? total / static_cast<double>(num_items) : 0.0;
  return result;
}

// The step's line: loss, lr, norm, time, throughput and the fraction of the matmul rate it reached.
// The host bytes of the counted steps (after the first, which allocates AdamW's moments): what
// storages held at the peak, and what the allocator keeps cached for reuse on top of it.
std::string memory_line(const Accelerator& accelerator) {
  const MemoryStats host = accelerator.memory_stats().front().stats;
  const double mib = 1.0 / (1 << 20);
  return fmt::format("host memory over those steps: peak in storages {:.0f} MiB; now in storages {:.0f} MiB, cached "
                     "{:.0f} MiB, taken from the system {:.0f} MiB",
                     host.peak_allocated_bytes * mib, host.allocated_bytes * mib, host.cached_bytes * mib,
                     host.reserved_bytes * mib);
}

std::string step_line(const Run& r, int64_t step, const StepResult& result, double lr, double seconds) {
  const double tokens_per_second = static_cast<double>(r.tokens_per_step) / seconds;
  // Each rank's share of the step's FLOPs (data and tensor parallelism both divide them) against one
  // rank's reference rate.
  const double ranks = r.accelerator.num_processes();
  const double gflops = r.flops_per_token * tokens_per_second / ranks / 1e9;
  const std::string skipped = r.accelerator.optimizer_step_was_skipped() ? " (step skipped: fp16 overflow)" : "";
  return fmt::format("step {}/{}: train loss {:.6f} lr {:.4e}{}{} {:.1f} ms {:.0f} tok/s {:.1f} GFLOP/s {:.1f}% of matmul",
                     step, r.flags.steps, result.loss, lr,
                     r.flags.grad_clip > 0 ? fmt::format(" norm {:.4f}", result.norm) : std::string(), skipped,
                     1e3 * seconds, tokens_per_second, gflops, 100.0 * gflops / r.rate.gflops);
}

// Validation and samples after a step, when their intervals (or the last step) say so.
void after_step(Run& r, int64_t step) {
  const bool last = step == r.flags.steps;
  if (r.val && r.flags.val_every > 0 && (step % r.flags.val_every == 0 || last))
    r.accelerator.print(fmt::format("val loss {:.6f} at step {}", validate(*r.net, *r.val, r.flags.val_steps, r.accelerator),
                                    step));
  if (r.flags.sample_every > 0 && (step % r.flags.sample_every == 0 || last)) {
    const int64_t eot = r.tokenizer && r.tokenizer->eot_token >= 0 ? r.tokenizer->eot_token
                        : llmc::kGpt2EndOfText < r.net->config().vocab_size ? llmc::kGpt2EndOfText : 0;
    const std::vector<int64_t> ids = sample(*r.net, eot, r.flags.sample_tokens, r.sample_gen, r.accelerator);
    r.accelerator.print(fmt::format("sample at step {}: {}", step, show_sample(ids, r.tokenizer)));
  }
}

// The window's size from the total batch: an Error unless the micro-batches of every rank divide it.
int64_t accumulation_of(const TrainFlags& flags, const Accelerator& accelerator) {
  if (accelerator.gradient_accumulation_steps() != 1)
    throw Error(fmt::format("train_gpt2: gradient_accumulation_steps is {} ({}); train_gpt2 derives accumulation "
                            "from --total_batch_size, so leave it at 1",
                            accelerator.gradient_accumulation_steps(),
                            accelerator.settings().gradient_accumulation_steps.source));
  const int64_t ranks = accelerator.strategy().data_shard().world_size;
  const int64_t micro = flags.batch_size * flags.seq_len * ranks;
  if (flags.total_batch_size == 0) return 1;
  if (flags.total_batch_size % micro != 0)
    throw Error(fmt::format("train_gpt2: --total_batch_size {} is not a multiple of B {} x T {} x {} data-parallel "
                            "rank(s) = {} tokens",
                            flags.total_batch_size, flags.batch_size, flags.seq_len, ranks, micro));
  return flags.total_batch_size / micro;
}

// Under ZeRO-3 each unit's parameters are gathered for that unit's forward only. GPT-2's units are its
// blocks (FSDP's transformer wrapping), however stage 3 was asked for: fewer, larger gathers than one
// unit per Linear, and the tied wte stays with the root, whose forward its head runs in.
AcceleratorOptions with_gpt2_units(AcceleratorOptions options) {
  const EffectiveSettings settings = resolve_settings(options, environment_variables());
  if (settings.zero_stage.value == 3 && !options.fsdp_plugin) {
    options.deepspeed_plugin.reset();
    options.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard,
                                     .auto_wrap = {.module_types = {"GPTBlock"}},
                                     .reshard_after_forward = settings.reshard_after_forward.value};
  }
  return options;
}

int train(Accelerator& accelerator, const TrainFlags& flags, const CheckpointFlags& checkpoints) {
  const int64_t accumulation = accumulation_of(flags, accelerator);
  if (flags.lr_schedule == "cosine" && flags.warmup_steps >= flags.steps)
    throw Error(fmt::format("train_gpt2: --warmup_steps {} leaves no step for the cosine of --steps {}",
                            flags.warmup_steps, flags.steps));
  auto model = make_model(flags);
  const nn::GPTConfig config = model->config();
  if (flags.seq_len > config.block_size)
    throw Error(fmt::format("train_gpt2: --seq_len {} exceeds the model's context of {} tokens", flags.seq_len,
                            config.block_size));
  auto optimizer = make_optimizer(*model, flags);
  auto [net, opt] = accelerator.prepare(model, optimizer);
  const DataShard dp = accelerator.strategy().data_shard();
  const auto shuffle = flags.shuffle ? std::optional<uint64_t>(flags.seed) : std::nullopt;
  Run r{accelerator, flags, net, opt,
        llmc::TokenShardLoader(flags.train_data, flags.batch_size, flags.seq_len, dp.rank, dp.world_size,
                               config.vocab_size, shuffle),
        std::nullopt, std::nullopt, accumulation, flags.batch_size * flags.seq_len * dp.world_size * accumulation,
        flops_per_token(*net, flags.seq_len), MatmulRate{}, Generator(flags.seed + 1)};
  if (!flags.val_data.empty())
    r.val.emplace(flags.val_data, flags.batch_size, flags.seq_len, dp.rank, dp.world_size, config.vocab_size);
  if (!flags.tokenizer.empty()) {
    r.tokenizer = llmc::read_gpt2_tokenizer(flags.tokenizer);
    if (r.tokenizer->vocab_size() < config.vocab_size)
      throw Error(fmt::format("train_gpt2: --tokenizer {} holds {} tokens, fewer than the model's vocab of {}",
                              flags.tokenizer, r.tokenizer->vocab_size(), config.vocab_size));
  }
  // The CPU's rate is measured (on every rank at once, as they share the machine during the steps).
  r.rate = accelerator.device().is_cpu() ? measure_matmul_rate(Device::cpu())
                                         : reference_matmul_rate(accelerator.device(), accelerator.precision_policy().compute);
  accelerator.register_for_checkpointing(r.train);
  checkpoints.resume(accelerator);
  accelerator.print(fmt::format(
      "train_gpt2: {} layers, {} heads, {} channels, vocab {} (padded {}), {} parameters; B {} x T {} x {} rank(s) x {} "
      "micro-batch(es) = {} tokens a step; {} train shard(s); matmul reference {:.1f} GFLOP/s ({})",
      config.n_layer, config.n_head, config.n_embd, config.vocab_size, config.embedding_rows(),
      parameter_count(*net), flags.batch_size, flags.seq_len, dp.world_size, accumulation,
      r.tokens_per_step, r.train.shard_count(), r.rate.gflops, r.rate.source));
  OpTimeTable op_table;
  const int64_t first_step = accelerator.completed_steps();
  for (int64_t step = first_step; step < flags.steps; ++step) {
    const double lr = flags.lr_at(step);
    opt->set_lr(lr);
    if (flags.profile_ops && step == first_step + 1) accelerator.reset_peak_memory_stats();
    if (flags.profile_ops && step > first_step) op_table.begin_step();
    const auto start = std::chrono::steady_clock::now();
    const StepResult result = train_step(r);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    op_table.end_step(seconds);
    accelerator.print(step_line(r, step + 1, result, lr, seconds));
    accelerator.log({{"loss", result.loss}, {"lr", lr}}, step + 1);
    if (accelerator.should_stop()) return kPreemptedExitStatus;  // a SIGTERM: saved, stop
    if (checkpoints.save_after_step(step + 1)) accelerator.save_state();
    after_step(r, step + 1);
  }
  if (flags.profile_ops) {
    accelerator.print(op_table.str(r.flops_per_token * static_cast<double>(r.tokens_per_step) /
                                   accelerator.num_processes(), r.rate.gflops));
    accelerator.print(memory_line(accelerator));
  }
  if (!checkpoints.output_dir.empty()) save_final_model(accelerator, *net, checkpoints.output_dir, flags.save_format);
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train GPT-2 on llm.c token shards through accel's Accelerator, printing one line per step"};
  TrainFlags flags;
  flags.add_to(app);
  CheckpointFlags checkpoints;
  checkpoints.add_to(app);
  TrackingFlags tracking;
  tracking.add_to(app);
  app.footer("With --output_dir the final model is written there too (--save_format). Under `accel launch -n N` "
             "each data-parallel rank reads its own part of every step, as llm.c's loader does.");
  CLI11_PARSE(app, argc, argv);
  try {
    AcceleratorOptions options;
    options.project_configuration = checkpoints.project();
    tracking.apply(options);
    Accelerator accelerator(with_gpt2_units(options));
    accelerator.init_trackers("train_gpt2", {{"steps", flags.steps}, {"batch_size", flags.batch_size},
                                             {"seq_len", flags.seq_len}, {"total_batch_size", flags.total_batch_size},
                                             {"lr", flags.lr}, {"seed", flags.seed}});
    return train(accelerator, flags, checkpoints);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
