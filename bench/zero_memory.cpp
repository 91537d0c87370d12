// zero_memory: the bytes one rank holds for parameters, gradients, f32 masters and optimizer state
// under DDP, ZeRO stages 1-3 and (on 2 or more ranks) HYBRID_SHARD in shard groups of half the ranks, after one AdamW step on an MLP of about 50M parameters, in f32 and
// under bf16, next to ZeRO's formulas (f32: 16Ψ; 4Ψ + 4Ψ + 8Ψ/N; 4Ψ + 12Ψ/N; 16Ψ/N. bf16 with f32
// masters: 2Ψ + 2Ψ + 12Ψ/N; 2Ψ + 14Ψ/N; 16Ψ/N), and the host allocator's bytes: in use after the
// step, and the peak during it (from the allocator's counters, relative to what the process held
// before the model was built). Run under mpirun at 1, 2 and 4 ranks:
//   mpirun -np 4 build/bench/zero_memory [--layers 12 --width 2048] [--mixed_precision no,bf16] [--json out.json]
// The table (rank 0) says what each rank measures; the ranks agree to within one unit's padding.
// A second table gives stage 3's peak from before the model is built to the end of prepare, for a
// normal build and for one under DeferredInit (docs/zero.md, "Models larger than one rank").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "accel.h"
#include "runtime/strategy/memory_estimate.h"

using namespace accel;

namespace {

struct Row {
  std::string label;  // "0"-"3", or "H/S": HYBRID_SHARD in shard groups of S
  int stage = 0;
  int ranks = 1;
  bool main = true;
  std::string precision = "no";
  double params = 0, grads = 0, masters = 0, optimizer = 0;  // measured bytes, per rank
  double formula_params = 0, formula_grads = 0, formula_masters = 0, formula_optimizer = 0;
  double in_use = 0, step_peak = 0;  // the allocator's bytes, over the process's before the model
};

std::shared_ptr<nn::Sequential> make_mlp(int layers, int64_t width, bool deferred_init = false) {
  const DeferredInit scope(deferred_init);
  Generator gen(0);
  auto mlp = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    mlp->push_back(std::make_shared<nn::Linear>(width, width, true, gen));
    if (i + 1 < layers) mlp->push_back(std::make_shared<nn::Tanh>());
  }
  return mlp;
}

// DDP holds every parameter, its grad (in the reducer's buckets, which the grads are views of) and
// the whole optimizer state. Under bf16 its parameters are the f32 masters (the 16-bit copies
// autocast reads, 2Ψ more, are the precision's and are not counted here).
Row measure_ddp(const nn::Module& model, const optim::Optimizer& optimizer) {
  Row r;
  for (const Tensor& p : model.parameters()) {
    r.params += static_cast<double>(p.nbytes());
    if (p.grad().defined()) r.grads += static_cast<double>(p.grad().nbytes());
  }
  for (const auto& [key, t] : optimizer.state_dict())
    if (key != "lr") r.optimizer += static_cast<double>(t.nbytes());
  return r;
}

MixedPrecision mixed_precision_of(const std::string& name) {
  const std::optional<MixedPrecision> p = value_in(kMixedPrecisionNames, name);
  if (!p || (*p != MixedPrecision::no && *p != MixedPrecision::bf16 && *p != MixedPrecision::fp16))
    throw Error(fmt::format("zero_memory: --mixed_precision '{}' is not one of no, bf16, fp16", name));
  return *p;
}

// hybrid_shard_size > 0: HYBRID_SHARD in shard groups of that size (stage 3 within each).
Row run_stage(int stage, const std::string& precision, int layers, int64_t width, int hybrid_shard_size = 0) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.mixed_precision = precision;
  if (hybrid_shard_size > 0)
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard, .auto_wrap = {},
                               .hybrid_shard_size = hybrid_shard_size};
  else if (stage > 0)
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  const double baseline = static_cast<double>(accelerator.memory_stats()[0].stats.allocated_bytes);
  auto model = make_mlp(layers, width);
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{});
  const double psi = [&] {
    double n = 0;
    for (const Tensor& p : model->parameters()) n += static_cast<double>(p.numel());
    return n;
  }();
  auto [net, opt] = accelerator.prepare(model, adamw);
  Generator gen(1);
  const Tensor x = randn({4, width}, gen), y = randn({4, width}, gen);
  accelerator.reset_peak_memory_stats();  // the step's peak, not the full model that stage 3 shards at prepare
  opt->zero_grad();
  {
    auto autocast = accelerator.autocast();
    accelerator.backward(nn::mse_loss((*net)(x), y));
  }
  opt->step();
  const MemoryStats host = accelerator.memory_stats()[0].stats;
  Row r;
  if (const auto* zero = dynamic_cast<const ZeroStrategy*>(&accelerator.strategy())) {
    const ZeroStrategy::HeldBytes held = zero->held_bytes();
    r.params = static_cast<double>(held.parameters);
    r.grads = static_cast<double>(held.gradients);
    r.masters = static_cast<double>(held.master_weights);
    r.optimizer = static_cast<double>(held.optimizer_state);
  } else {
    r = measure_ddp(*net, *opt);
  }
  r.in_use = static_cast<double>(host.allocated_bytes) - baseline;
  r.step_peak = static_cast<double>(host.peak_allocated_bytes) - baseline;
  r.stage = stage;
  r.label = hybrid_shard_size > 0 ? fmt::format("H/{}", hybrid_shard_size) : std::to_string(stage);
  r.ranks = accelerator.num_processes();
  r.main = accelerator.is_main_process();
  r.precision = precision;
  // ZeRO's formulas for AdamW (runtime/strategy/memory_estimate.h), which `accel estimate-memory` prints too.
  const MemoryEstimate formula =
      hybrid_shard_size > 0
          ? estimate_hybrid_shard_memory(static_cast<int64_t>(psi), hybrid_shard_size, accelerator.num_processes(),
                                         mixed_precision_of(precision), 8)
          : estimate_memory(static_cast<int64_t>(psi), stage, accelerator.num_processes(), mixed_precision_of(precision), 8);
  r.formula_params = static_cast<double>(formula.parameters);
  r.formula_grads = static_cast<double>(formula.gradients);
  r.formula_masters = static_cast<double>(formula.master_weights);
  r.formula_optimizer = static_cast<double>(formula.optimizer_state);
  return r;
}

// Stage 3's peak host bytes from before the model is built to the end of prepare (its shards and
// what it took to get them), over what the process held before.
double prepare_peak(bool deferred_init, int layers, int64_t width) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = 3, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  accelerator.wait_for_everyone();
  const double baseline = static_cast<double>(accelerator.memory_stats()[0].stats.allocated_bytes);
  accelerator.reset_peak_memory_stats();
  auto model = make_mlp(layers, width, deferred_init);
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{});
  auto [net, opt] = accelerator.prepare(model, adamw);
  return static_cast<double>(accelerator.memory_stats()[0].stats.peak_allocated_bytes) - baseline;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-rank bytes of parameters, gradients, f32 masters and optimizer state under DDP and ZeRO 1-3"};
  int layers = 12;
  int64_t width = 2048;
  std::vector<std::string> precisions{"no", "bf16"};
  std::string json_path;
  app.add_option("--layers", layers, "Linear layers")->capture_default_str();
  app.add_option("--width", width, "Features of each layer")->capture_default_str();
  app.add_option("--mixed_precision", precisions, "no, bf16, fp16")->delimiter(',')->capture_default_str();
  app.add_option("--json", json_path, "Also write the rows as JSON");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& p : precisions) mixed_precision_of(p);  // a bad name fails before any run
  std::vector<Row> rows;
  for (const std::string& p : precisions) {
    for (int stage = 0; stage <= 3; ++stage) rows.push_back(run_stage(stage, p, layers, width));
    const int world = rows.back().ranks;
    if (world >= 2 && world % 2 == 0) rows.push_back(run_stage(3, p, layers, width, world / 2));
  }
  const double normal_peak = prepare_peak(false, layers, width), deferred_peak = prepare_peak(true, layers, width);
  if (!rows.back().main) return 0;
  const int ranks = rows.back().ranks;
  const double mb = 1 << 20;
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (i == 0 || rows[i - 1].precision != r.precision) {
      std::cout << fmt::format("{}ZeRO memory per rank, {} ranks, {} x Linear({}, {}), mixed_precision {}, AdamW after "
                               "one step (MiB)\n",
                               i == 0 ? "" : "\n", ranks, layers, width, width, r.precision);
      std::cout << fmt::format(
          "{:>5} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} {:>6} | {:>9} {:>9}\n", "stage",
          "params", "formula", "grads", "formula", "masters", "formula", "optimizer", "formula", "total", "formula",
          "ratio", "in use", "step peak");
    }
    const double total = r.params + r.grads + r.masters + r.optimizer;
    const double formula = r.formula_params + r.formula_grads + r.formula_masters + r.formula_optimizer;
    std::cout << fmt::format(
        "{:>5} | {:>9.1f} {:>9.1f} | {:>9.1f} {:>9.1f} | {:>9.1f} {:>9.1f} | {:>9.1f} {:>9.1f} | {:>9.1f} {:>9.1f} "
        "{:>6.3f} | {:>9.1f} {:>9.1f}\n",
        r.label, r.params / mb, r.formula_params / mb, r.grads / mb, r.formula_grads / mb, r.masters / mb,
        r.formula_masters / mb, r.optimizer / mb, r.formula_optimizer / mb, total / mb, formula / mb, total / formula,
        r.in_use / mb, r.step_peak / mb);
    out.push_back({{"stage", r.label}, {"ranks", ranks}, {"mixed_precision", r.precision}, {"params_bytes", r.params},
                   {"grads_bytes", r.grads}, {"masters_bytes", r.masters}, {"optimizer_bytes", r.optimizer},
                   {"formula_bytes", formula}, {"in_use_bytes", r.in_use}, {"step_peak_bytes", r.step_peak}});
  }
  if (ranks >= 2 && ranks % 2 == 0)
    std::cout << fmt::format("H/{}: HYBRID_SHARD in shard groups of {} (stage 3 within each, replicated across them): "
                             "its formula is stage 3's at N = {}\n",
                             ranks / 2, ranks / 2, ranks / 2);
  // The f32 rows' parameters: the prepare peaks are of an f32 model.
  const Row& ddp = rows[0];
  const Row& stage3 = rows[3];  // rows 0-3: the first precision's stages 0-3
  if (ddp.precision == "no")
    std::cout << fmt::format("stage 3, build + prepare peak per rank (MiB): normal build {:.1f}, deferred init {:.1f}; "
                             "full parameters {:.1f}, this rank's shards {:.1f}\n",
                             normal_peak / mb, deferred_peak / mb, ddp.formula_params / mb, stage3.params / mb);
  out.push_back({{"stage", 3}, {"ranks", ranks}, {"prepare_peak_normal_bytes", normal_peak},
                 {"prepare_peak_deferred_bytes", deferred_peak}});
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
