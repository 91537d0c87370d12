// The ops issue 18 touched (tanh, gelu, layer_norm, cross_entropy), forward and forward + backward
// through the user's API, in a source that also builds against older trees so that their times can
// be compared binary against binary (bench/README.md, "Numerics"); last, a small GPT's loss, where
// the same ops run among the matmuls.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <omp.h>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accel.h"
#if __has_include("tensor/deterministic.h")
#include "tensor/deterministic.h"
#define ACCEL_BENCH_HAS_DETERMINISTIC 1
#endif
#if __has_include("tensor/cross_entropy_options.h")
#define ACCEL_BENCH_HAS_CE_OPTIONS 1
#endif

using namespace accel;

namespace {

double median_ms(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  const size_t h = s.size() / 2;
  return 1e3 * (s.size() % 2 ? s[h] : 0.5 * (s[h - 1] + s[h]));
}

double time_ms(int warmup, int repeats, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> s;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_ms(s);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : "unknown";
}

struct Row {
  std::string op, shape;
  std::function<Tensor(const Tensor&)> forward;  // of the input that requires grad
  Tensor input;
};

// The rows: each op's forward of a leaf x; forward + backward runs the same with x requiring grad.
std::vector<Row> rows() {
  Generator gen(7);
  const int64_t n = int64_t{1} << 20;
  const Tensor act = randn({n}, gen) * 2.0;
  const Tensor ln_x = randn({4096, 1024}, gen) + 1000.0;
  const Tensor ln_w = rand({1024}, gen) * 0.5 + 0.75, ln_b = zeros({1024});
  const Tensor logits = randn({4096, 1024}, gen);
  const Tensor target = to(rand({4096}, gen, DType::f64) * 1023.0, DType::i64);
  std::vector<Row> out{
      {"tanh", "1048576", [](const Tensor& x) { return tanh(x); }, act},
      {"gelu", "1048576", [](const Tensor& x) { return gelu(x); }, act},
      {"layer_norm", "4096x1024", [=](const Tensor& x) { return layer_norm(x, ln_w, ln_b); }, ln_x},
      {"cross_entropy", "4096x1024", [=](const Tensor& x) { return cross_entropy(x, target); }, logits},
  };
#if ACCEL_BENCH_HAS_CE_OPTIONS
  const Tensor weight = rand({1024}, gen) + 0.5;
  out.push_back({"cross_entropy weight+smoothing", "4096x1024",
                 [=](const Tensor& x) {
                   return cross_entropy(x, target, {.weight = weight, .label_smoothing = 0.1});
                 },
                 logits});
#endif
  return out;
}

// The same ops inside a model: a small GPT's loss (layer_norm, gelu, cross_entropy around its matmuls).
void gpt_row(int warmup, int repeats) {
  Generator gen(8);
  const nn::GPTConfig config{.vocab_size = 256, .block_size = 128, .n_layer = 2, .n_head = 4, .n_embd = 256};
  nn::GPT model(config, gen);
  const Tensor idx = to(rand({8, 128}, gen, DType::f64) * 255.0, DType::i64);
  const Tensor target = to(rand({8, 128}, gen, DType::f64) * 255.0, DType::i64);
  const double fwd = time_ms(warmup, repeats, [&] {
    NoGradGuard no_grad;
    (void)nn::cross_entropy(model(idx), target);
  });
  const double both = time_ms(warmup, repeats, [&] {
    model.zero_grad();
    backward(nn::cross_entropy(model(idx), target));
  });
  fmt::print("{:<32} {:>10} {:>12.3f} {:>14.3f}\n", "GPT 2x256 loss, 8x128 tokens", "1024x256", fwd, both);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tanh, gelu, layer_norm and cross_entropy in f32 on the CPU: forward, and forward + backward"};
  int warmup = 3, repeats = 21;
  bool deterministic = false;
  app.add_option("--warmup", warmup, "untimed runs of each")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", repeats, "timed runs of each (the median is printed)")->check(CLI::PositiveNumber);
  app.add_flag("--deterministic", deterministic, "run in deterministic mode (trees that have it)");
  CLI11_PARSE(app, argc, argv);
#if ACCEL_BENCH_HAS_DETERMINISTIC
  set_deterministic_mode(deterministic);
#else
  if (deterministic) {
    fmt::print(stderr, "touched_ops: this tree has no deterministic mode\n");
    return 2;
  }
#endif
  fmt::print("f32 CPU, {} OpenMP threads, deterministic {}, median of {} after {} warm-ups; load average {}\n",
             omp_get_max_threads(), deterministic ? "on" : "off", repeats, warmup, load_average());
  fmt::print("{:<32} {:>10} {:>12} {:>14}\n", "op", "shape", "forward ms", "fwd+bwd ms");
  for (const Row& r : rows()) {
    const Tensor leaf = detach(r.input).requires_grad_(true);
    const Tensor probe = r.forward(r.input);
    const Tensor grad_out = probe.numel() == 1 ? ones_like(probe) : ones_like(probe) * 0.5;
    const double fwd = time_ms(warmup, repeats, [&] {
      NoGradGuard no_grad;
      (void)r.forward(r.input);
    });
    const double both = time_ms(warmup, repeats, [&] {
      leaf.set_grad(Tensor());
      backward(r.forward(leaf), grad_out);
    });
    fmt::print("{:<32} {:>10} {:>12.3f} {:>14.3f}\n", r.op, r.shape, fwd, both);
  }
  gpt_row(warmup, repeats);
  return 0;
}
