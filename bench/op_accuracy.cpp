// tanh, gelu and layer_norm in f32, forward and backward: the time of accel's ops next to the formulas
// they replaced (bench/previous_ops.h), alternated in one run, with each one's worst error against
// f64 (ulps for tanh/gelu forward, relative floored at 1e-3 of the largest for their grads, absolute
// for layer norm on rows of 1000 + N(0, 1)).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/previous_ops.h"
#include "bench/timing.h"
#include "tensor/creation.h"
#include "tensor/generator.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"
#include "bench/activation_reference.h"

using namespace accel;

namespace {

using timing::median;
using timing::seconds_of;

struct Row {
  std::string op, shape;
  double old_ms = 0, new_ms = 0;
  std::string unit;  // of the errors
  double old_error = 0, new_error = 0;
};

struct Timing {
  int warmup, repeats;
};

// Median ms of old and new, alternated so that a burst of load on a shared machine hits both alike.
std::pair<double, double> time_pair(const Timing& t, const std::function<void()>& old_fn,
                                    const std::function<void()>& new_fn) {
  for (int i = 0; i < t.warmup; ++i) {
    old_fn();
    new_fn();
  }
  std::vector<double> old_s, new_s;
  for (int i = 0; i < t.repeats; ++i) {
    old_s.push_back(seconds_of(old_fn));
    new_s.push_back(seconds_of(new_fn));
  }
  return {1e3 * median(old_s), 1e3 * median(new_s)};
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// The worst errors of the old and new forms over the activation sweep of bench/activation_reference.h.
struct ActivationErrors {
  double tanh[2], tanh_grad[2], gelu[2], gelu_grad[2];  // [old, new]
};

ActivationErrors activation_errors() {
  using namespace accel::test;
  const std::vector<float> xs = activation_sweep();
  const Tensor x = from_vector<float>(xs), ones = ones_like(x);
  ActivationErrors e{};
  e.tanh[0] = max_ulp_error(xs, values(bench::previous::tanh(x)), ref_tanh).error;
  e.tanh[1] = max_ulp_error(xs, values(nograd::tanh(x)), ref_tanh).error;
  e.tanh_grad[0] = max_floored_relative_error(
      xs, values(bench::previous::tanh_backward_from_output(ones, bench::previous::tanh(x))), ref_tanh_grad).error;
  e.tanh_grad[1] = max_floored_relative_error(xs, values(nograd::tanh_backward(ones, x)), ref_tanh_grad).error;
  e.gelu[0] = max_ulp_error(xs, values(bench::previous::gelu(x)), ref_gelu, 1e-36).error;
  e.gelu[1] = max_ulp_error(xs, values(nograd::gelu(x)), ref_gelu, 1e-36).error;
  e.gelu_grad[0] = max_floored_relative_error(xs, values(bench::previous::gelu_backward(ones, x)), ref_gelu_grad).error;
  e.gelu_grad[1] = max_floored_relative_error(xs, values(nograd::gelu_backward(ones, x)), ref_gelu_grad).error;
  return e;
}

void activation_rows(int64_t n, const Timing& t, const ActivationErrors& e, std::vector<Row>& rows) {
  Generator gen(1);
  const Tensor x = nograd::mul(randn({n}, gen), 2.0), g = randn({n}, gen);
  const Tensor y_old = bench::previous::tanh(x);
  const std::string shape = std::to_string(n);
  auto add = [&](std::string op, const std::function<void()>& old_fn, const std::function<void()>& new_fn,
                 std::string unit, const double (&err)[2]) {
    const auto [old_ms, new_ms] = time_pair(t, old_fn, new_fn);
    rows.push_back({std::move(op), shape, old_ms, new_ms, std::move(unit), err[0], err[1]});
  };
  add("tanh", [&] { (void)bench::previous::tanh(x); }, [&] { (void)nograd::tanh(x); }, "ulp", e.tanh);
  add("tanh backward", [&] { (void)bench::previous::tanh_backward_from_output(g, y_old); },
      [&] { (void)nograd::tanh_backward(g, x); }, "rel", e.tanh_grad);
  add("gelu", [&] { (void)bench::previous::gelu(x); }, [&] { (void)nograd::gelu(x); }, "ulp", e.gelu);
  add("gelu backward", [&] { (void)bench::previous::gelu_backward(g, x); },
      [&] { (void)nograd::gelu_backward(g, x); }, "rel", e.gelu_grad);
}

// The f64 statistics of row i of x.
std::pair<double, double> row_stats(const std::vector<float>& xv, int64_t i, int64_t dim, double eps) {
  double sum = 0, sq = 0;
  for (int64_t j = 0; j < dim; ++j) sum += xv[i * dim + j];
  const double mean = sum / static_cast<double>(dim);
  for (int64_t j = 0; j < dim; ++j) sq += (xv[i * dim + j] - mean) * (xv[i * dim + j] - mean);
  return {mean, 1 / std::sqrt(sq / static_cast<double>(dim) + eps)};
}

// max |got - want| over the rows of x, with want the f64 layer norm (weight w, no bias) of each row.
double layer_norm_error(const std::vector<float>& xv, const std::vector<float>& wv, const std::vector<float>& got,
                        int64_t rows, int64_t dim, double eps) {
  double worst = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const auto [mean, rstd] = row_stats(xv, i, dim, eps);
    for (int64_t j = 0; j < dim; ++j)
      worst = std::max(worst, std::fabs(got[i * dim + j] - (xv[i * dim + j] - mean) * rstd * wv[j]));
  }
  return worst;
}

// max |got - want| of the input grad for upstream grad gv, want from the f64 statistics.
double layer_norm_grad_error(const std::vector<float>& xv, const std::vector<float>& wv, const std::vector<float>& gv,
                             const std::vector<float>& got, int64_t rows, int64_t dim, double eps) {
  double worst = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const auto [mean, rstd] = row_stats(xv, i, dim, eps);
    double mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double dxhat = static_cast<double>(gv[i * dim + j]) * wv[j];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * (xv[i * dim + j] - mean) * rstd;
    }
    mean_dxhat /= static_cast<double>(dim);
    mean_dxhat_xhat /= static_cast<double>(dim);
    for (int64_t j = 0; j < dim; ++j) {
      const double dxhat = static_cast<double>(gv[i * dim + j]) * wv[j], xhat = (xv[i * dim + j] - mean) * rstd;
      worst = std::max(worst, std::fabs(got[i * dim + j] - rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)));
    }
  }
  return worst;
}

void layer_norm_rows(int64_t rows_n, int64_t dim, const Timing& t, std::vector<Row>& rows) {
  constexpr double kEps = 1e-5;
  Generator gen(2);
  const Tensor x = nograd::add(randn({rows_n, dim}, gen), 1000.0), g = randn({rows_n, dim}, gen);
  const Tensor w = nograd::add(nograd::mul(rand({dim}, gen), 0.5), 0.75), b = zeros({dim});
  const auto old_fwd = bench::previous::layer_norm(x, w, b, kEps);
  const auto new_fwd = nograd::layer_norm(x, w, b, kEps);
  const std::string shape = fmt::format("{}x{}", rows_n, dim);
  const auto [fo, fn] = time_pair(t, [&] { (void)bench::previous::layer_norm(x, w, b, kEps); },
                                  [&] { (void)nograd::layer_norm(x, w, b, kEps); });
  const std::vector<float> xv = values(x), wv = values(w);
  rows.push_back({"layer_norm", shape, fo, fn, "abs", layer_norm_error(xv, wv, values(old_fwd.out), rows_n, dim, kEps),
                  layer_norm_error(xv, wv, values(new_fwd.out), rows_n, dim, kEps)});
  const auto [bo, bn] = time_pair(
      t, [&] { (void)bench::previous::layer_norm_backward(g, x, old_fwd.mean, old_fwd.rstd, w); },
      [&] { (void)nograd::layer_norm_backward(g, x, new_fwd.mean, new_fwd.rstd, w, b); });
  const std::vector<float> gv = values(g);
  const auto old_dx = bench::previous::layer_norm_backward(g, x, old_fwd.mean, old_fwd.rstd, w).grad_input;
  const auto new_dx = nograd::layer_norm_backward(g, x, new_fwd.mean, new_fwd.rstd, w, b).grad_input;
  rows.push_back({"layer_norm backward", shape, bo, bn, "abs",
                  layer_norm_grad_error(xv, wv, gv, values(old_dx), rows_n, dim, kEps),
                  layer_norm_grad_error(xv, wv, gv, values(new_dx), rows_n, dim, kEps)});
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : "unknown";
}

void print(const std::vector<Row>& rows) {
  fmt::print("{:<20} {:>10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>5}\n", "op", "shape", "old ms", "new ms",
             "new/old", "old error", "new error", "unit");
  for (const Row& r : rows) {
    fmt::print("{:<20} {:>10} {:>10.3f} {:>10.3f} {:>8.2f}x {:>11.3g} {:>11.3g} {:>5}\n", r.op, r.shape, r.old_ms,
               r.new_ms, r.new_ms / r.old_ms, r.old_error, r.new_error, r.unit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"accel's f32 tanh, gelu and layer_norm against the formulas they replaced: time and accuracy"};
  Timing timing{3, 21};
  std::string json_path;
  app.add_option("--warmup", timing.warmup, "untimed runs of each before timing")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", timing.repeats, "timed runs of each (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the rows to this JSON file");
  CLI11_PARSE(app, argc, argv);

  const std::string load_at_start = load_average();
  fmt::print("f32 on the CPU, {} OpenMP threads, {} warm-ups, median of {} alternated runs; load average {}\n"
             "time \"new/old\" > 1 is slower; errors: ulp of f64 (forward), |err| / max(|ref|, 1e-3 max|ref|)\n"
             "(grads), max |err| on rows of 1000 + N(0, 1) (layer_norm, its input grad)\n\n",
             omp_get_max_threads(), timing.warmup, timing.repeats, load_at_start);
  const ActivationErrors errors = activation_errors();
  std::vector<Row> rows;
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 23}) activation_rows(n, timing, errors, rows);
  for (auto [r, d] : {std::pair<int64_t, int64_t>{4096, 1024}, {512, 8192}}) layer_norm_rows(r, d, timing, rows);
  print(rows);

  if (!json_path.empty()) {
    nlohmann::json j;
    j["threads"] = omp_get_max_threads();
    j["warmup"] = timing.warmup;
    j["repeats"] = timing.repeats;
    j["load_average_at_start"] = load_at_start;
    for (const Row& r : rows)
      j["rows"].push_back({{"op", r.op}, {"shape", r.shape}, {"old_ms", r.old_ms}, {"new_ms", r.new_ms},
                           {"error_unit", r.unit}, {"old_error", r.old_error}, {"new_error", r.new_error}});
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
