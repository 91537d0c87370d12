// tp_speed: the step time of a GPT at tp_size 1, 2 and 4 on the same ranks and global batch (the rest
// of the ranks are data-parallel replicas), and what the tensor-parallel group sends, counted from its
// communicator's ledger: the [B, T, C] all-reduces of f and g (theory: 2 forward and 2 backward per
// block, plus the embedding's g and the head's f), their bytes per block against a ring's 2(tp-1)/tp,
// the vocab-parallel loss's three small all-reduces, and the dp replicas' gradient bytes.
//   accel launch -n 4 build/bench/tp_speed [--rounds 5 --steps 5]
// The sizes alternate within each round, so the machine's load falls on all of them alike.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <vector>

#include <accel.h>

#include "ring_bytes.h"
#include "timing.h"

using namespace accel;

namespace {

// Per step, from the tp group's ledger and the others'.
struct Result {
  std::vector<double> ms;
  double g_count = 0, f_count = 0;  // reduce_from_tp_region (forward) and copy_to_tp_region (backward)
  double block_bytes = 0;           // the f and g of the blocks: all but the step's first g (the
                                    // embedding's) and first f (the head's)
  double loss_bytes = 0;            // the rest of the tp group's: the loss's three all-reduces
  double grad_bytes = 0;            // every other communicator: the dp reducer's
};

// Sorts the tp ledger's entries of one step (seq above mark) into r, each divided by steps; returns
// their bytes.
double count_step(const CollectiveLedger& tp_ledger, uint64_t mark, int tp, int steps, Result& r) {
  bool first_g = true, first_f = true;
  double total = 0;
  for (const LedgerEntry& e : tp_ledger.entries()) {
    if (e.seq <= mark) continue;
    const double bytes = ring::bytes_of(e, tp) / steps;
    const bool g = e.site.find("reduce_from_tp_region") != std::string::npos;
    const bool f = e.site.find("copy_to_tp_region") != std::string::npos;
    if (g) r.g_count += 1.0 / steps;
    if (f) r.f_count += 1.0 / steps;
    if ((g && !first_g) || (f && !first_f)) r.block_bytes += bytes;
    else if (!g && !f) r.loss_bytes += bytes;
    first_g = first_g && !g;
    first_f = first_f && !f;
    total += bytes;
  }
  return total;
}

nn::GPTConfig bench_config(int layers) {
  return {.vocab_size = 512, .block_size = 64, .n_layer = layers, .n_head = 8, .n_embd = 256, .dropout = 0.0,
          .tie_weights = true};
}

Tensor random_ids(const accel::Shape& shape, int64_t n, Generator& gen) {
  return to(rand(shape, gen) * static_cast<double>(n), DType::i64);
}

// steps timed steps (after warmup) at tp_size tp; the counts of the timed steps go into out once,
// the times every call.
void run_size(int tp, const nn::GPTConfig& config, int64_t global_batch, int steps, int warmup, bool count,
              Result& out) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.parallelism_config = ParallelismConfig{.tp_size = tp};
  Accelerator accelerator(o);
  Generator init(0);
  auto model = std::make_shared<nn::GPT>(config, init);
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-3});
  auto [net, opt] = accelerator.prepare(model, adamw);
  const DataShard shard = accelerator.strategy().data_shard();
  const int dp = shard.world_size;
  const int64_t rows = global_batch / dp;
  const CollectiveLedger* tp_ledger = nullptr;
  if (const auto* tensor_parallel = dynamic_cast<const TensorParallel*>(&accelerator.strategy()))
    tp_ledger = &tensor_parallel->mesh().comm("tp").ledger();
  auto group_size = [&](const CollectiveLedger& l) { return &l == tp_ledger ? tp : dp; };
  ring::Marks marks;
  for (int s = 0; s < warmup + steps; ++s) {
    Generator gen(static_cast<uint64_t>(100 + s * dp + shard.rank));
    const Tensor idx = random_ids({rows, config.block_size}, config.vocab_size, gen);
    const Tensor target = random_ids({rows, config.block_size}, config.vocab_size, gen);
    accelerator.wait_for_everyone();
    ring::bytes_since(marks, group_size);
    const uint64_t tp_mark = tp_ledger ? tp_ledger->last_seq() : 0;
    const auto start = timing::Clock::now();
    opt->zero_grad();
    accelerator.backward(net->loss(idx, target));
    opt->step();
    const double ms = 1e3 * timing::seconds_since(start);
    const double step_bytes = ring::bytes_since(marks, group_size) / steps;
    if (s < warmup) continue;
    out.ms.push_back(ms);
    if (!count) continue;
    const double tp_bytes = tp_ledger ? count_step(*tp_ledger, tp_mark, tp, steps, out) : 0;
    out.grad_bytes += step_bytes - tp_bytes;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step time and tensor-parallel traffic of a GPT at tp_size 1, 2 and 4"};
  int rounds = 5, steps = 5, warmup = 2, layers = 4;
  int64_t batch = 8;
  app.add_option("--rounds", rounds, "Rounds; each runs every tp size once")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per size per round")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps before them")->capture_default_str();
  app.add_option("--layers", layers, "GPT blocks")->capture_default_str();
  app.add_option("--batch", batch, "Global batch (sequences), split between the dp replicas")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  int ranks = 1;
  bool main_process = true;
  {
    AcceleratorOptions quiet;
    quiet.print_settings = false;
    Accelerator probe(quiet);
    ranks = probe.num_processes();
    main_process = probe.is_main_process();
  }
  const nn::GPTConfig config = bench_config(layers);
  std::vector<int> sizes;
  for (int tp : {1, 2, 4})
    if (ranks % tp == 0 && batch % (ranks / tp) == 0) sizes.push_back(tp);
  std::map<int, Result> results;
  for (int r = 0; r < rounds; ++r)
    for (int tp : sizes) run_size(tp, config, batch, steps, warmup, r == 0, results[tp]);  // bytes: round 0's
  if (!main_process) return 0;
  std::cout << fmt::format(
      "Tensor-parallel GPT ({} blocks, C={}, {} heads, vocab {}, T={}), {} ranks, global batch {}, AdamW f32; "
      "median of {} rounds x {} steps. Bytes per rank per step from the ledgers, ring costs.\n",
      layers, config.n_embd, config.n_head, config.vocab_size, config.block_size, ranks, batch, rounds, steps);
  std::cout << fmt::format("{:>3} {:>3} {:>9} {:>7} {:>9} {:>9} {:>13} {:>13} {:>11} {:>14}\n", "tp", "dp", "step ms",
                           "vs tp1", "g (1+2L)", "f (2L+1)", "bytes/block", "theory/block", "loss bytes",
                           "dp grad bytes");
  const double base = results.count(1) ? timing::median(results[1].ms) : 0;
  for (int tp : sizes) {
    const Result& res = results[tp];
    const double rows = static_cast<double>(batch / (ranks / tp));
    // 2 all-reduces of [B, T, C] forward and 2 backward per block, each 2 (tp - 1) / tp of it on a ring.
    const double activation_bytes = rows * static_cast<double>(config.block_size * config.n_embd) * 4.0;
    const double theory_block = 4 * 2.0 * (tp - 1) / tp * activation_bytes;
    std::cout << fmt::format("{:>3} {:>3} {:>9.2f} {:>6.2f}x {:>9.0f} {:>9.0f} {:>13.0f} {:>13.0f} {:>11.0f} {:>14.0f}\n",
                             tp, ranks / tp, timing::median(res.ms), base > 0 ? timing::median(res.ms) / base : 0.0,
                             res.g_count, res.f_count, res.block_bytes / layers, theory_block, res.loss_bytes,
                             res.grad_bytes);
  }
  return 0;
}
