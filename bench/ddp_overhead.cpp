// What gradient sync costs a data-parallel step: the foundation MLP (784-1024-1024-10, f32, AdamW,
// 256 samples per rank) timed with the reducer's all-reduces and, on the same ranks and batch,
// inside no_sync(); and, for scale, the same step on an unprepared model with a plain backward.
// Run it on 2 ranks: `accel launch -n 2 build/bench/ddp_overhead` (or mpirun -np 2).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include <accel.h>

#include "foundation_mlp.h"

using namespace accel;

namespace {

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step time of the foundation MLP with and without gradient sync"};
  int64_t batch = 256;
  int steps = 10, rounds = 5, warmup = 3;
  double bucket_cap_mb = 25;
  std::string json_path;
  app.add_option("--batch", batch, "Samples per rank per step")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per mode in each round")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds; each times both modes, alternating against drift")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps per mode first")->capture_default_str();
  app.add_option("--bucket-cap-mb", bucket_cap_mb, "The reducer's bucket cap")->capture_default_str();
  app.add_option("--json", json_path, "also write the results to this JSON file (main process)");
  CLI11_PARSE(app, argc, argv);

  try {
    AcceleratorOptions options;
    options.print_settings = false;
    options.bucket_cap_mb = bucket_cap_mb;
    Accelerator accelerator(options);
    const int ranks = accelerator.num_processes();

    auto model = make_foundation_mlp();
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
    auto [net, opt] = accelerator.prepare(model, optimizer);
    // Not prepared: no reducer, plain autograd backward.
    auto plain = make_foundation_mlp();
    optim::AdamW plain_opt(plain->parameters(), optim::AdamWOptions{.lr = 1e-4});

    // Each rank its own random batch (the values do not change the cost).
    Generator data_gen(100 + static_cast<uint64_t>(accelerator.process_index()));
    const Tensor x = randn({batch, 784}, data_gen);
    const Tensor y = to(rand({batch}, data_gen) * 10.0, DType::i64);

    enum Mode { kNoSync, kSync, kPlain, kModes };
    auto step = [&](int mode) {
      if (mode == kPlain) {
        plain_opt.zero_grad();
        backward(nn::cross_entropy((*plain)(x), y));
        plain_opt.step();
        return;
      }
      opt->zero_grad();
      const Tensor loss = nn::cross_entropy((*net)(x), y);
      if (mode == kSync) {
        accelerator.backward(loss);
      } else {
        auto scope = accelerator.no_sync();
        accelerator.backward(loss);
      }
      opt->step();
    };
    std::vector<double> times[kModes];
    for (int mode = 0; mode < kModes; ++mode)
      for (int i = 0; i < warmup; ++i) step(mode);
    for (int round = 0; round < rounds; ++round) {
      for (int mode = 0; mode < kModes; ++mode) {
        accelerator.wait_for_everyone();
        for (int i = 0; i < steps; ++i) {
          const auto start = std::chrono::steady_clock::now();
          step(mode);
          const auto stop = std::chrono::steady_clock::now();
          times[mode].push_back(std::chrono::duration<double, std::milli>(stop - start).count());
        }
      }
    }
    // The job runs at its slower rank's pace: per step, the largest time over the ranks.
    double median[kModes], p10[kModes], p90[kModes];
    for (int mode = 0; mode < kModes; ++mode) {
      const Tensor all = accelerator.gather(from_vector(times[mode]));
      const std::vector<double> v = all.to_vector<double>();
      const size_t n = times[mode].size();
      std::vector<double> slowest(n, 0.0);
      for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < n; ++i) slowest[i] = std::max(slowest[i], v[static_cast<size_t>(r) * n + i]);
      median[mode] = percentile(slowest, 0.5);
      p10[mode] = percentile(slowest, 0.1);
      p90[mode] = percentile(slowest, 0.9);
    }
    const double overhead = 100.0 * (median[kSync] / median[kNoSync] - 1.0);
    const Reducer* reducer = accelerator.reducer(*net);
    const size_t buckets = reducer ? reducer->buckets().size() : 0;
    accelerator.print(fmt::format("ddp_overhead: {} rank(s), backend {}, MLP 784-1024-1024-10 f32, AdamW, batch {} per "
                                  "rank, {} buckets (cap {} MiB), {} timed steps per mode",
                                  ranks, accelerator.backend(), batch, buckets, bucket_cap_mb, rounds * steps));
    const char* names[kModes] = {"no sync (no_sync())", "gradient sync", "plain backward"};
    accelerator.print(fmt::format("{:<22}{:>14}{:>10}{:>10}", "mode", "median ms", "p10", "p90"));
    for (int mode = 0; mode < kModes; ++mode)
      accelerator.print(
          fmt::format("{:<22}{:>14.2f}{:>10.2f}{:>10.2f}", names[mode], median[mode], p10[mode], p90[mode]));
    accelerator.print(fmt::format("{:<22}{:>13.1f}%   (gradient sync / no sync - 1)", "sync overhead", overhead));
    if (!json_path.empty() && accelerator.is_main_process()) {
      nlohmann::json j = {{"benchmark", "ddp_overhead"},
                          {"ranks", ranks},
                          {"backend", accelerator.backend()},
                          {"batch_per_rank", batch},
                          {"bucket_cap_mb", bucket_cap_mb},
                          {"buckets", buckets},
                          {"timed_steps_per_mode", rounds * steps},
                          {"overhead_percent", overhead}};
      for (int mode = 0; mode < kModes; ++mode)
        j["modes"][names[mode]] = {{"median_ms", median[mode]}, {"p10_ms", p10[mode]}, {"p90_ms", p90[mode]}};
      std::ofstream(json_path) << j.dump(2) << "\n";
    }
    if (ranks == 1) accelerator.print("note: one process has nothing to sync; run it on 2 ranks");
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
