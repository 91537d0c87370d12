// `accel bench allreduce|allgather|reducescatter|broadcast|precision`: the command-line side of the
// benchmarks (options, MPI and the backends, the printed table and --json); the measurements themselves
// are bench/lib/collective_bench.h and bench/lib/precision_bench.h.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <utility>
#include <vector>

#include "bench/lib/collective_kind.h"

namespace accel {

class BenchCommand {
 public:
  // Adds `bench` and its subcommands to app; the values land in this object, which must outlive parsing.
  explicit BenchCommand(CLI::App& app);
  // True when the parsed command line chose `accel bench ...`.
  bool selected() const;
  // Runs the chosen benchmark. A collective runs on every rank of the MPI job this process belongs to
  // (a plain start is a job of one) and prints on rank 0; precision runs in this process. Returns the
  // exit status: 1 when any collective result was wrong.
  int run();

 private:
  int run_precision();

  CLI::App* bench_ = nullptr;
  std::vector<std::pair<CLI::App*, bench::CollectiveKind>> collectives_;
  std::string min_bytes_ = "8", max_bytes_ = "256M";
  int64_t factor_ = 2;
  std::vector<std::string> dtypes_ = {"f32"};
  std::vector<std::string> ops_ = {"sum"};
  std::vector<std::string> backends_ = {"mpi", "ring"};
  bool only_in_place_ = false, only_out_of_place_ = false;
  int warmup_ = 5, iters_ = 20, root_ = 0;
  std::string json_path_;
  // precision
  CLI::App* precision_ = nullptr;
  std::vector<std::string> devices_;
  std::vector<int64_t> gemm_sizes_ = {256, 512, 1024};
  int64_t elements_ = int64_t{1} << 23;
  std::vector<int64_t> widths_ = {784, 1024, 1024, 10};
  int64_t batch_ = 256;
  int precision_warmup_ = 2, precision_iters_ = 10;
};

}  // namespace accel
