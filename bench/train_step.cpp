// Training-step benchmark: the MLP 784-1024-1024-10 (ReLU), batch 256, AdamW, f32, on random data,
// trained by the loop a user writes; reports the median step time, its GFLOP/s, and that rate as a
// fraction of the rate of the same GEMMs run as plain matmuls in the same process. --deterministic
// runs all of it in deterministic mode (tensor/deterministic.h), to measure what the mode costs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include <accel.h>
#include "bench/timing.h"

#include "tensor/deterministic.h"

using namespace accel;

namespace {

using timing::Clock;
using timing::median;
using timing::seconds_since;

// One GEMM of the step: out[m, n] = a[m, k] @ b[k, n], with a or b read through a transposed view
// when the step reads it that way.
struct Gemm {
  std::string what;
  int64_t m, k, n;
  bool a_transposed, b_transposed;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

// The products of one step of the MLP with widths w (w[0] inputs, w.back() classes): per layer
// (in -> out) the forward x @ W^T, the weight grad g^T @ x, and the input grad g @ W for every
// layer but the first (the data needs no grad).
std::vector<Gemm> step_gemms(int64_t batch, const std::vector<int64_t>& w) {
  std::vector<Gemm> gemms;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    const int64_t in = w[l], out = w[l + 1];
    gemms.push_back({fmt::format("fwd   x@W^T  L{}", l + 1), batch, in, out, false, true});
    gemms.push_back({fmt::format("bwd   g^T@x  L{}", l + 1), out, batch, in, true, false});
    if (l > 0) gemms.push_back({fmt::format("bwd   g@W    L{}", l + 1), batch, out, in, false, false});
  }
  return gemms;
}

// Median seconds of one plain accel matmul of g's shapes and layouts.
double time_gemm(const Gemm& g, int reps, Generator& gen) {
  const Tensor a = g.a_transposed ? transpose(randn({g.k, g.m}, gen), 0, 1) : randn({g.m, g.k}, gen);
  const Tensor b = g.b_transposed ? transpose(randn({g.n, g.k}, gen), 0, 1) : randn({g.k, g.n}, gen);
  for (int i = 0; i < 3; ++i) matmul(a, b);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    const Tensor out = matmul(a, b);
    times.push_back(seconds_since(start));
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time one training step of the MLP 784-1024-1024-10 (batch 256, AdamW, f32) on the CPU"};
  int steps = 50, warmup = 5, threads = 0, gemm_reps = 30;
  int64_t batch = 256;
  std::vector<int64_t> widths = {784, 1024, 1024, 10};
  std::string json_path;
  bool deterministic = false;
  app.add_option("--steps", steps, "Timed steps (after warm-up)")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->capture_default_str();
  app.add_option("--batch", batch, "Batch size")->capture_default_str();
  app.add_option("--widths", widths, "Layer widths, inputs first, classes last")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (0: OMP_NUM_THREADS or all cores)")->capture_default_str();
  app.add_option("--gemm-reps", gemm_reps, "Repeats of each plain matmul")->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file ('-' for stdout)");
  app.add_flag("--deterministic", deterministic, "Run in deterministic mode (results independent of the thread count)");
  CLI11_PARSE(app, argc, argv);
  if (widths.size() < 2 || steps < 1) {
    fmt::print(stderr, "train_step: need at least two widths and one step\n");
    return 2;
  }
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();
  set_deterministic_mode(deterministic);

  try {
    Generator gen(0);
    auto model = std::make_shared<nn::Sequential>();
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      if (l > 0) model->push_back(std::make_shared<nn::ReLU>());
      model->push_back(std::make_shared<nn::Linear>(widths[l], widths[l + 1], true, gen));
    }
    optim::AdamW optimizer(model->parameters(), {.lr = 1e-3});
    const Tensor x = randn({batch, widths.front()}, gen);
    const Tensor y = to(rand({batch}, gen) * static_cast<double>(widths.back()), DType::i64);

    // The loop a user writes, with each phase timed.
    std::vector<double> step_s, forward_s, backward_s, update_s;
    double first_loss = 0, last_loss = 0;
    // On stderr, so the table and JSON on stdout stay as they were; updated outside the timed phases.
    ProgressBar bar(warmup + steps, {.description = "train_step", .out = &std::cerr});
    for (int i = 0; i < warmup + steps; ++i) {
      const auto t0 = Clock::now();
      optimizer.zero_grad();
      Tensor loss = nn::cross_entropy(model->forward(x), y);
      const auto t1 = Clock::now();
      backward(loss);
      const auto t2 = Clock::now();
      optimizer.step();
      const auto t3 = Clock::now();
      if (i == 0) first_loss = loss.item();
      last_loss = loss.item();
      bar.set("loss", last_loss);
      bar.update();
      if (i < warmup) continue;
      auto d = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
      forward_s.push_back(d(t0, t1));
      backward_s.push_back(d(t1, t2));
      update_s.push_back(d(t2, t3));
      step_s.push_back(d(t0, t3));
    }
    bar.close();

    // The same products as plain matmuls, in this process and with these threads.
    const std::vector<Gemm> gemms = step_gemms(batch, widths);
    double step_flops = 0, gemm_s = 0;
    std::vector<double> gemm_times;
    for (const Gemm& g : gemms) {
      gemm_times.push_back(time_gemm(g, gemm_reps, gen));
      step_flops += g.flops();
      gemm_s += gemm_times.back();
    }

    const double step_median = median(step_s);
    const double step_gflops = step_flops / step_median / 1e9;
    const double gemm_gflops = step_flops / gemm_s / 1e9;
    fmt::print("train_step: MLP {} (ReLU), batch {}, AdamW, f32, {} threads, {} steps after {} warm-up{}\n",
               fmt::join(widths, "-"), batch, threads, steps, warmup, deterministic ? ", deterministic mode" : "");
    fmt::print("loss {:.4f} -> {:.4f}\n\n", first_loss, last_loss);
    fmt::print("{:<22} {:>12}\n", "phase", "median ms");
    fmt::print("{:<22} {:>12.3f}\n", "zero_grad+forward+loss", 1e3 * median(forward_s));
    fmt::print("{:<22} {:>12.3f}\n", "backward", 1e3 * median(backward_s));
    fmt::print("{:<22} {:>12.3f}\n", "optimizer.step (AdamW)", 1e3 * median(update_s));
    fmt::print("{:<22} {:>12.3f}\n\n", "step", 1e3 * step_median);
    fmt::print("{:<22} {:>16} {:>10} {:>10}\n", "plain matmul", "M x K x N", "ms", "GFLOP/s");
    for (size_t i = 0; i < gemms.size(); ++i)
      fmt::print("{:<22} {:>16} {:>10.3f} {:>10.1f}\n", gemms[i].what,
                 fmt::format("{}x{}x{}", gemms[i].m, gemms[i].k, gemms[i].n), 1e3 * gemm_times[i],
                 gemms[i].flops() / gemm_times[i] / 1e9);
    fmt::print("{:<22} {:>16} {:>10.3f} {:>10.1f}\n\n", "all of them", "", 1e3 * gemm_s, gemm_gflops);
    fmt::print("step FLOPs (the GEMMs above: 2*M*K*N each) {:.4g}\n", step_flops);
    fmt::print("median step {:.3f} ms, {:.1f} GFLOP/s, {:.1f} % of the plain-matmul rate\n", 1e3 * step_median,
               step_gflops, 100.0 * step_gflops / gemm_gflops);

    if (!json_path.empty()) {
      nlohmann::json j = {{"benchmark", "train_step"},
                          {"widths", widths},
                          {"batch", batch},
                          {"threads", threads},
                          {"deterministic", deterministic},
                          {"steps", steps},
                          {"warmup", warmup},
                          {"median_step_ms", 1e3 * step_median},
                          {"median_forward_ms", 1e3 * median(forward_s)},
                          {"median_backward_ms", 1e3 * median(backward_s)},
                          {"median_update_ms", 1e3 * median(update_s)},
                          {"step_flops", step_flops},
                          {"step_gflops", step_gflops},
                          {"matmul_gflops", gemm_gflops},
                          {"fraction_of_matmul", step_gflops / gemm_gflops},
                          {"final_loss", last_loss}};
      if (json_path == "-") {
        fmt::print("{}\n", j.dump(2));
      } else {
        std::ofstream(json_path) << j.dump(2) << "\n";
      }
    }
  } catch (const Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
