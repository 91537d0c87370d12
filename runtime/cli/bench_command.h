// `accel bench allreduce|allgather|reducescatter|broadcast`: the command-line side of the collective
// benchmarks (options, MPI and the backends, the printed table and --json); the sweep itself is
// runtime/bench/collective_bench.h.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <utility>
#include <vector>

#include "runtime/bench/collective_kind.h"

namespace accel {

class BenchCommand {
 public:
  // Adds `bench` and its subcommands to app; the values land in this object, which must outlive parsing.
  explicit BenchCommand(CLI::App& app);
  // True when the parsed command line chose `accel bench ...`.
  bool selected() const;
  // Runs the chosen benchmark on every rank of the MPI job this process belongs to (a plain start is a
  // job of one). Prints on rank 0; returns the exit status: 1 when any result was wrong.
  int run();

 private:
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
};

}  // namespace accel
