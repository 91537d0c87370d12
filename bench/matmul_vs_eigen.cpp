// Times an f32 matmul through accel's tensor (nograd::matmul into a fresh output, as users call it)
// against raw Eigen (MatrixXf, .noalias()) in one run, and prints medians, GFLOP/s and the ratio; and
// the same nograd::matmul in deterministic mode (fixed tiles, tensor/deterministic.h) against the default.
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accel.h"
#include "bench/timing.h"
#include "tensor/deterministic.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

using timing::median;
using timing::seconds_of;

struct Case {
  std::string name;
  int64_t m, k, n;
  bool transposed_b;  // b is read as w^T with w a contiguous [N, K] (a Linear weight)
};

struct Result {
  Case c;
  double accel_ms, eigen_ms, max_diff;
  double deterministic_ms, deterministic_diff;  // deterministic mode, and its max |diff| from the default
};

Result run_case(const Case& c, int warmup, int repeats) {
  Generator gen(42);
  const Tensor a = randn({c.m, c.k}, gen);
  const Tensor w = c.transposed_b ? randn({c.n, c.k}, gen) : randn({c.k, c.n}, gen);
  const Tensor b = c.transposed_b ? nograd::transpose(w, 0, 1) : w;

  // The same values in Eigen's own (column-major) matrices.
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::MatrixXf ea = Eigen::Map<const RowMat>(a.data<float>(), c.m, c.k);
  const Eigen::MatrixXf ew = Eigen::Map<const RowMat>(w.data<float>(), w.size(0), w.size(1));
  Eigen::MatrixXf ec(c.m, c.n);
  auto eigen_product = [&] {
    if (c.transposed_b) ec.noalias() = ea * ew.transpose();
    else ec.noalias() = ea * ew;
  };

  Tensor out, out_deterministic;
  auto accel_product = [&] { out = nograd::matmul(a, b); };
  auto deterministic_product = [&] {
    const DeterministicGuard on;
    out_deterministic = nograd::matmul(a, b);
  };
  for (int i = 0; i < warmup; ++i) {
    accel_product();
    eigen_product();
    deterministic_product();
  }
  // Alternate the three so that a burst of load on a shared machine hits them alike.
  std::vector<double> accel_s, eigen_s, deterministic_s;
  for (int i = 0; i < repeats; ++i) {
    accel_s.push_back(seconds_of(accel_product));
    eigen_s.push_back(seconds_of(eigen_product));
    deterministic_s.push_back(seconds_of(deterministic_product));
  }

  const float* o = out.data<float>();
  double max_diff = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j)
      max_diff = std::max(max_diff, static_cast<double>(std::abs(o[i * c.n + j] - ec(i, j))));
  double deterministic_diff = 0;
  const float* od = out_deterministic.data<float>();
  for (int64_t i = 0; i < c.m * c.n; ++i)
    deterministic_diff = std::max(deterministic_diff, static_cast<double>(std::abs(od[i] - o[i])));
  return {c, 1e3 * median(accel_s), 1e3 * median(eigen_s), max_diff, 1e3 * median(deterministic_s),
          deterministic_diff};
}

// The 1-minute load average, printed with the table: on a shared machine it says how far to trust it.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : "unknown";
}

double gflops(const Case& c, double ms) { return 2.0 * c.m * c.k * c.n / (ms * 1e6); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"accel matmul vs raw Eigen, f32 on the CPU"};
  int warmup = 3, repeats = 11;
  std::string json_path;
  app.add_option("--warmup", warmup, "untimed runs of each product before timing")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", repeats, "timed runs of each product (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the results to this JSON file");
  CLI11_PARSE(app, argc, argv);

  const std::string load_at_start = load_average();
  const std::vector<Case> cases = {
      {"square", 256, 256, 256, false},    {"square", 512, 512, 512, false}, {"square", 1024, 1024, 1024, false},
      {"square", 2048, 2048, 2048, false}, {"x @ w^T", 1024, 1024, 1024, true},
      // Shapes of a training step: a Linear on a batch of 256 (MLP), a long inner dim with a small output.
      {"x @ w^T", 256, 784, 1024, true},   {"x @ w^T", 256, 1024, 10, true},    {"long K", 8, 2048, 8, false},
      {"long K", 64, 16384, 64, false},
  };

  fmt::print("matmul f32: accel nograd::matmul (fresh output) vs Eigen MatrixXf .noalias(); {} OpenMP threads, "
             "{} warm-ups, median of {}; load average {}\n\n",
             omp_get_max_threads(), warmup, repeats, load_at_start);
  fmt::print("{:<9} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10} {:>9} {:>10} {:>10}\n", "case", "M",
             "K", "N", "accel ms", "accel GF/s", "eigen ms", "eigen GF/s", "accel/eigen", "max |diff|", "determ ms",
             "determ/acc", "det |diff|");
  std::vector<Result> results;
  for (const Case& c : cases) {
    const Result r = run_case(c, warmup, repeats);
    results.push_back(r);
    fmt::print("{:<9} {:>5} {:>5} {:>5} {:>10.3f} {:>10.1f} {:>10.3f} {:>10.1f} {:>11.1f}% {:>10.1e} {:>9.3f} "
               "{:>9.1f}% {:>10.1e}\n",
               c.name, c.m, c.k, c.n, r.accel_ms, gflops(c, r.accel_ms), r.eigen_ms, gflops(c, r.eigen_ms),
               100.0 * r.eigen_ms / r.accel_ms, r.max_diff, r.deterministic_ms, 100.0 * r.deterministic_ms / r.accel_ms,
               r.deterministic_diff);
    std::fflush(stdout);
  }

  for (const Result& r : results)
    if (r.c.m == 1024 && !r.c.transposed_b)
      fmt::print("\nrequirement: accel >= 90% of raw Eigen at 1024x1024x1024: {} ({:.1f}%)\n",
                 r.eigen_ms / r.accel_ms >= 0.9 ? "met" : "NOT met", 100.0 * r.eigen_ms / r.accel_ms);

  if (!json_path.empty()) {
    nlohmann::json j;
    j["threads"] = omp_get_max_threads();
    j["warmup"] = warmup;
    j["repeats"] = repeats;
    j["load_average_at_start"] = load_at_start;
    for (const Result& r : results)
      j["results"].push_back({{"case", r.c.name}, {"m", r.c.m}, {"k", r.c.k}, {"n", r.c.n},
                              {"accel_ms", r.accel_ms}, {"eigen_ms", r.eigen_ms},
                              {"accel_gflops", gflops(r.c, r.accel_ms)}, {"eigen_gflops", gflops(r.c, r.eigen_ms)},
                              {"ratio", r.eigen_ms / r.accel_ms}, {"max_abs_diff", r.max_diff},
                              {"deterministic_ms", r.deterministic_ms},
                              {"deterministic_over_default", r.deterministic_ms / r.accel_ms},
                              {"deterministic_max_abs_diff", r.deterministic_diff}});
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
