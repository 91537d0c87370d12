// f32 GEMM at the shapes of one GPT-2 training step: accel's CPU matmul (Eigen, or the BLAS it was
// built with) against the sgemm of each BLAS library installed here, loaded side by side with dlopen
// (they all export cblas_sgemm), with 1 and 2 threads, interleaved so that noise hits all alike.
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <fmt/format.h>
#include <omp.h>

#include <accel.h>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/timing.h"

using namespace accel;

namespace {

// cblas's enums, as every cblas.h numbers them.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);
using SetThreadsFn = void (*)(int);

// One BLAS library opened on its own. RTLD_LOCAL keeps its symbols from the others, and RTLD_DEEPBIND
// makes its own calls (cblas_sgemm into its sgemm kernels, its thread setter) bind to itself rather
// than to the OpenBLAS that libaccel is linked with, which would otherwise answer them all.
struct BlasLibrary {
  std::string name;
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
};

std::optional<BlasLibrary> open_library(const std::string& name, const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!handle) return std::nullopt;
  BlasLibrary lib{name, reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"))};
  for (const char* setter : {"openblas_set_num_threads", "bli_thread_set_num_threads"})
    if (void* f = dlsym(handle, setter)) lib.set_threads = reinterpret_cast<SetThreadsFn>(f);
  if (!lib.sgemm) return std::nullopt;
  return lib;
}

// out[m, n] = a[m, k] @ b[k, n] as the step runs it: a is read transposed when the step holds it
// [k, m] (a weight gradient dY^T @ X), b when it holds it [n, k] (x @ W^T).
struct Gemm {
  std::string what;
  int64_t m, k, n;
  bool a_transposed, b_transposed;
  int per_step;  // how many times one step runs it
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

// GPT-2's linears for B*T rows: forward x @ W^T, the input grad dY @ W and the weight grad dY^T @ X.
std::vector<Gemm> gpt2_step_gemms(int64_t rows, int64_t c, int64_t vocab, int layers) {
  const struct {
    const char* name;
    int64_t in, out;
    int count;
  } linears[] = {{"qkv", c, 3 * c, layers}, {"attn proj", c, c, layers}, {"fc", c, 4 * c, layers},
                 {"fc proj", 4 * c, c, layers}, {"lm head", c, vocab, 1}};
  std::vector<Gemm> gemms;
  for (const auto& l : linears) {
    gemms.push_back({fmt::format("{} x@W^T", l.name), rows, l.in, l.out, false, true, l.count});
    gemms.push_back({fmt::format("{} dY@W", l.name), rows, l.out, l.in, false, false, l.count});
    gemms.push_back({fmt::format("{} dY^T@X", l.name), l.out, rows, l.in, true, false, l.count});
  }
  return gemms;
}

// The operands of one Gemm in the layout the step holds them.
struct Operands {
  Tensor a, b;  // stored [m, k] or [k, m]; [k, n] or [n, k]
  Tensor out;
};

Operands make_operands(const Gemm& g, Generator& gen) {
  return {g.a_transposed ? randn({g.k, g.m}, gen) : randn({g.m, g.k}, gen),
          g.b_transposed ? randn({g.n, g.k}, gen) : randn({g.k, g.n}, gen), zeros({g.m, g.n})};
}

void run_accel(const Gemm& g, const Operands& o) {
  const Tensor a = g.a_transposed ? transpose(o.a, 0, 1) : o.a;
  const Tensor b = g.b_transposed ? transpose(o.b, 0, 1) : o.b;
  (void)matmul(a, b);
}

void run_blas(const BlasLibrary& lib, const Gemm& g, const Operands& o) {
  const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  lib.sgemm(kRowMajor, g.a_transposed ? kTrans : kNoTrans, g.b_transposed ? kTrans : kNoTrans, m, n, k, 1.0f,
            static_cast<const float*>(o.a.data_ptr()), g.a_transposed ? m : k,
            static_cast<const float*>(o.b.data_ptr()), g.b_transposed ? k : n, 0.0f,
            static_cast<float*>(o.out.data_ptr()), n);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"f32 GEMM at GPT-2's step shapes: accel's CPU matmul against each BLAS library found"};
  int reps = 9, layers = 12;
  int64_t rows = 256, c = 768, vocab = 50304;
  std::vector<int> thread_counts{1, 2};
  std::map<std::string, std::string> library_paths{
      {"openblas-openmp", "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"},
      {"openblas-pthread", "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"},
      {"blis-openmp", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"}};
  app.add_option("--reps", reps, "Timed runs of each GEMM; the table quotes their median");
  app.add_option("--rows", rows, "B*T, the rows of the step's activations");
  app.add_option("--n_embd", c, "GPT-2's width");
  app.add_option("--vocab", vocab, "The padded vocabulary of the lm head");
  app.add_option("--threads", thread_counts, "Thread counts to measure");
  app.add_option("--library", library_paths, "NAME=PATH of a BLAS library to load (the defaults are Debian's)");
  CLI11_PARSE(app, argc, argv);

  std::vector<BlasLibrary> libraries;
  for (const auto& [name, path] : library_paths) {
    if (auto lib = open_library(name, path)) libraries.push_back(*lib);
    else fmt::print("{}: not found at {} (skipped)\n", name, path);
  }
  Generator gen(0);
  const std::vector<Gemm> gemms = gpt2_step_gemms(rows, c, vocab, layers);
  std::vector<Operands> operands;
  for (const Gemm& g : gemms) operands.push_back(make_operands(g, gen));

  std::vector<std::string> columns{"accel"};
  for (const auto& lib : libraries) columns.push_back(lib.name);
  for (const int threads : thread_counts) {
    omp_set_num_threads(threads);
    for (const auto& lib : libraries)
      if (lib.set_threads) lib.set_threads(threads);
    fmt::print("\n{} thread(s): GFLOP/s, median of {}\n{:<20}", threads, reps, "gemm (m x k x n)");
    for (const auto& col : columns) fmt::print("{:>18}", col);
    fmt::print("\n");
    std::vector<double> step_seconds(columns.size(), 0.0);
    for (size_t i = 0; i < gemms.size(); ++i) {
      const Gemm& g = gemms[i];
      std::vector<std::vector<double>> times(columns.size());
      for (int r = 0; r < reps + 2; ++r) {  // two warm-up rounds, then interleaved timed ones
        for (size_t col = 0; col < columns.size(); ++col) {
          const double s = timing::seconds_of([&] {
            if (col == 0) run_accel(g, operands[i]);
            else run_blas(libraries[col - 1], g, operands[i]);
          });
          if (r >= 2) times[col].push_back(s);
        }
      }
      fmt::print("{:<20}", g.what);
      for (size_t col = 0; col < columns.size(); ++col) {
        const double s = timing::median(times[col]);
        step_seconds[col] += s * g.per_step;
        fmt::print("{:>18.1f}", g.flops() / s / 1e9);
      }
      fmt::print("   {}x{}x{}\n", g.m, g.k, g.n);
    }
    double step_flops = 0;
    for (const Gemm& g : gemms) step_flops += g.flops() * g.per_step;
    fmt::print("{:<20}", "step's GEMMs, ms");
    for (const double s : step_seconds) fmt::print("{:>18.1f}", 1e3 * s);
    fmt::print("\n{:<20}", "step's GFLOP/s");
    for (const double s : step_seconds) fmt::print("{:>18.1f}", step_flops / s / 1e9);
    fmt::print("\n");
  }
}
