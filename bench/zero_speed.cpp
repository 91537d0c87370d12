// zero_speed: the step time of DDP and ZeRO stages 1-3 on the same ranks, model and batch, and the
// bytes each rank sends per step, counted from the communicators' ledgers with a ring's costs
// (all-reduce 2(N-1)/N of its elements; reduce-scatter and all-gather N-1 times the shard, which is
// what their ledger entries count), next to ZeRO's theory: 2Ψ for stages 0-2 and 3Ψ for stage 3 (in units of the dtype).
// Two models: the foundation MLP and a char_gpt-sized GPT (stage 3 wraps each GPTBlock).
//   accel launch -n 2 build/bench/zero_speed [--rounds 5 --steps 5]
// Stages alternate within each round, so the machine's load falls on all of them alike.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <map>
#include <vector>

#include <accel.h>

#include "foundation_mlp.h"
#include "ring_bytes.h"
#include "timing.h"

using namespace accel;

namespace {

// Integer ids in [0, n), uniform.
Tensor random_ids(const Shape& shape, int64_t n, Generator& gen) {
  return to(rand(shape, gen) * static_cast<double>(n), DType::i64);
}

struct Workload {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make_model;
  std::function<Tensor(nn::Module&, int step)> loss;  // this rank's micro-batch of step
  AutoWrapPolicy wrap;
};

struct Result {
  std::vector<double> ms;
  double bytes_per_step = 0;
  int64_t psi = 0;
};

void run_stage(const Workload& w, int stage, int steps, int warmup, Result& out) {
  AcceleratorOptions o;
  o.print_settings = false;
  if (stage == 3) o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .auto_wrap = w.wrap};
  else if (stage > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  auto model = w.make_model();
  out.psi = 0;
  for (const Tensor& p : model->parameters()) out.psi += p.numel();
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-3});
  auto [net, opt] = accelerator.prepare(model, adamw);
  ring::Marks marks;
  const int n = accelerator.num_processes();
  auto world_size = [n](const CollectiveLedger&) { return n; };
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) ring::bytes_since(marks, world_size);
    accelerator.wait_for_everyone();
    const auto start = timing::Clock::now();
    opt->zero_grad();
    accelerator.backward(w.loss(*net, s * accelerator.num_processes() + accelerator.process_index()));
    opt->step();
    const double ms = 1e3 * timing::seconds_since(start);
    if (s >= warmup) out.ms.push_back(ms);
  }
  // The barriers of the loop are on the world communicator, not the strategy's: only the step's
  // collectives remain once the barriers' own entries (zero bytes) are counted out by ring::bytes_of.
  out.bytes_per_step = ring::bytes_since(marks, world_size) / steps;
}

std::vector<Workload> workloads(int64_t batch) {
  Workload mlp{"mlp 784-1024-1024-10",
               [] { return std::static_pointer_cast<nn::Module>(make_foundation_mlp()); },
               [batch](nn::Module& m, int step) {
                 Generator gen(static_cast<uint64_t>(100 + step));
                 const Tensor x = randn({batch, 784}, gen);
                 const Tensor y = random_ids({batch}, 10, gen);
                 return nn::cross_entropy(m(x), y);
               },
               {}};
  const nn::GPTConfig gpt{.vocab_size = 65, .block_size = 64, .n_layer = 2, .n_head = 4, .n_embd = 64, .dropout = 0.0};
  Workload char_gpt{"char_gpt 2x64",
                    [gpt] {
                      Generator gen(0);
                      return std::static_pointer_cast<nn::Module>(std::make_shared<nn::GPT>(gpt, gen));
                    },
                    [gpt](nn::Module& m, int step) {
                      Generator gen(static_cast<uint64_t>(200 + step));
                      const Tensor idx = random_ids({16, gpt.block_size}, gpt.vocab_size, gen);
                      const Tensor target = random_ids({16, gpt.block_size}, gpt.vocab_size, gen);
                      return nn::cross_entropy(m(idx), target);
                    },
                    AutoWrapPolicy{.module_types = {"GPTBlock"}}};
  return {mlp, char_gpt};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step time and bytes sent per step of DDP and ZeRO stages 1-3"};
  int rounds = 5, steps = 5, warmup = 2;
  int64_t batch = 128;
  app.add_option("--rounds", rounds, "Rounds; each runs every stage once")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per stage per round")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps before them")->capture_default_str();
  app.add_option("--batch", batch, "MLP samples per rank per step")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  bool main_process = true;
  int ranks = 1;
  {
    AcceleratorOptions quiet;
    quiet.print_settings = false;
    Accelerator probe(quiet);
    main_process = probe.is_main_process();
    ranks = probe.num_processes();
  }
  if (main_process)
    std::cout << fmt::format("ZeRO speed, {} ranks, AdamW f32, median of {} rounds x {} steps (ms); bytes sent per "
                             "rank per step from the ledgers (ring costs), against theory in units of Ψ x 4 bytes\n",
                             ranks, rounds, steps);
  for (const Workload& w : workloads(batch)) {
    std::vector<Result> results(4);
    for (int r = 0; r < rounds; ++r)
      for (int stage = 0; stage <= 3; ++stage) run_stage(w, stage, steps, warmup, results[static_cast<size_t>(stage)]);
    if (!main_process) continue;
    const double ddp = timing::median(results[0].ms);
    std::cout << fmt::format("\n{} (Ψ = {})\n{:>7} {:>10} {:>8} {:>14} {:>10} {:>8}\n", w.name, results[0].psi,
                             "stage", "step ms", "vs DDP", "bytes/step", "sent/Ψ4", "theory");
    for (int stage = 0; stage <= 3; ++stage) {
      const Result& res = results[static_cast<size_t>(stage)];
      const double in_psi = res.bytes_per_step / (4.0 * static_cast<double>(res.psi));
      const double theory = (stage == 3 ? 3.0 : 2.0) * (ranks - 1) / ranks;
      std::cout << fmt::format("{:>7} {:>10.2f} {:>7.2f}x {:>14.0f} {:>10.3f} {:>8.3f}\n",
                               stage == 0 ? std::string("ddp") : fmt::format("zero{}", stage), timing::median(res.ms),
                               timing::median(res.ms) / ddp, res.bytes_per_step, in_psi, theory);
    }
  }
  return 0;
}
