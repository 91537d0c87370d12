// What the fault tooling costs a data-parallel step (bench/README.md, "Instrumentation cost"): the
// collective ledger, which is always on, and the timeline, which is on with ACCEL_TRACE. The step is
// ddp_overhead's MLP (784-1024-1024-10, f32, AdamW, 256 samples per rank).
// - The ledger cannot be turned off, so its cost is measured where it is spent: a ledger entry and its
//   finish, with the internal caller's label formatted as the reducer does, timed in a loop here, times
//   the collectives a step makes (counted from the ledgers), over the step's median time.
// - The timeline is timed directly: the same ranks alternate rounds with it recording and stopped.
// Run it on 2 ranks: `accel launch -n 2 build/bench/instrumentation_cost`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include <accel.h>

#include "collective/ledger.h"
#include "foundation_mlp.h"
#include "collective/timeline.h"
#include "runtime/process_state.h"

using namespace accel;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One collective's ledger work as the reducer causes it: its label, the entry, the finish.
double ledger_ns_per_collective(int64_t repeats) {
  CollectiveLedger ledger("bench");
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < repeats; ++i) {
    const CallSite site = CallSite::gradient_sync(fmt::format("reducer bucket {}", i % 4));
    ledger.finish(ledger.enter("all_reduce", DType::f32, 1 << 20, -1, site), false);
  }
  return 1e9 * seconds_since(start) / static_cast<double>(repeats);
}

// A span and a collective's slice while the timeline records (into memory; the file is not written).
std::pair<double, double> timeline_ns_per_event(int64_t repeats, const std::string& path) {
  timeline::start(path, 0, 1, "bench", steady_ns());
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < repeats; ++i) const timeline::Span span("backward");
  const double span_ns = 1e9 * seconds_since(start) / static_cast<double>(repeats);
  start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < repeats; ++i)
    timeline::collective_end(
        timeline::collective_begin({"all_reduce", "world", static_cast<uint64_t>(i), "f32", 1 << 20, "reducer bucket 0", true}),
        false);
  const double slice_ns = 1e9 * seconds_since(start) / static_cast<double>(repeats);
  timeline::stop();
  std::filesystem::remove(path);
  return {span_ns, slice_ns};
}

uint64_t collectives_so_far() {
  uint64_t n = 0;
  for (const auto& ledger : live_ledgers()) n += ledger->last_seq();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What the collective ledger and the timeline cost a data-parallel MLP step"};
  int64_t batch = 256, repeats = 200000;
  int steps = 10, rounds = 6, warmup = 3;
  app.add_option("--batch", batch, "Samples per rank per step")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per round")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds, alternating timeline off and on")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->capture_default_str();
  app.add_option("--repeats", repeats, "Iterations of the ledger and timeline loops")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / fmt::format("accel-instrumentation-{}", getpid());
    AcceleratorOptions options;
    options.print_settings = false;
    options.trace_dir = dir.string();  // so that prepare hooks the forward spans; rounds then stop and restart it
    Accelerator accelerator(options);
    const int rank = accelerator.process_index(), ranks = accelerator.num_processes();
    const std::string trace_file = (dir / fmt::format("accel_trace_rank{}.json", rank)).string();

    auto model = make_foundation_mlp();
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
    auto [net, opt] = accelerator.prepare(model, optimizer);
    Generator data_gen(100 + static_cast<uint64_t>(rank));
    const Tensor x = randn({batch, 784}, data_gen);
    const Tensor y = to(rand({batch}, data_gen) * 10.0, DType::i64);
    auto step = [&] {
      opt->zero_grad();
      accelerator.backward(nn::cross_entropy((*net)(x), y));
      opt->step();
    };

    for (int i = 0; i < warmup; ++i) step();
    std::vector<double> off, on;
    uint64_t collectives = 0;
    int counted_steps = 0;
    for (int round = 0; round < rounds; ++round) {
      const bool tracing = round % 2 == 1;
      if (tracing) timeline::start(trace_file, rank, ranks, host_name(), steady_ns());
      else timeline::stop();
      accelerator.wait_for_everyone();
      const uint64_t before = collectives_so_far();
      for (int i = 0; i < steps; ++i) {
        const auto start = std::chrono::steady_clock::now();
        step();
        (tracing ? on : off).push_back(1e3 * seconds_since(start));
      }
      collectives += collectives_so_far() - before;
      counted_steps += steps;
    }
    timeline::stop();
    std::filesystem::remove_all(dir);

    const double per_step = static_cast<double>(collectives) / counted_steps;
    const double ledger_ns = ledger_ns_per_collective(repeats);
    const auto [span_ns, slice_ns] = timeline_ns_per_event(repeats, (dir.string() + "-micro.json"));
    const double off_ms = median(off), on_ms = median(on);
    const double ledger_share = 100.0 * per_step * ledger_ns * 1e-6 / off_ms;
    const double timeline_share = 100.0 * (on_ms / off_ms - 1.0);
    accelerator.print(fmt::format("instrumentation_cost: {} rank(s), backend {}, MLP 784-1024-1024-10 f32, AdamW, "
                                  "batch {} per rank, {} timed steps each way (rank 0's times)",
                                  ranks, accelerator.backend(), batch, off.size()));
    accelerator.print(fmt::format("{:<44}{:>12}", "what", "value"));
    accelerator.print(fmt::format("{:<44}{:>12.3f}", "step, timeline off (median ms)", off_ms));
    accelerator.print(fmt::format("{:<44}{:>12.3f}", "step, timeline on (median ms)", on_ms));
    accelerator.print(fmt::format("{:<44}{:>12.1f}", "collectives per step (ledger entries)", per_step));
    accelerator.print(fmt::format("{:<44}{:>12.0f}", "ledger: ns per collective (label+enter+finish)", ledger_ns));
    accelerator.print(fmt::format("{:<44}{:>11.4f}%", "ledger: share of the step", ledger_share));
    accelerator.print(fmt::format("{:<44}{:>12.0f}", "timeline: ns per span", span_ns));
    accelerator.print(fmt::format("{:<44}{:>12.0f}", "timeline: ns per collective slice", slice_ns));
    accelerator.print(fmt::format("{:<44}{:>11.2f}%", "timeline: step on / off - 1", timeline_share));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "instrumentation_cost: {}\n", e.what());
    return 1;
  }
}
