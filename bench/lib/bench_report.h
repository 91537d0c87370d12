// BenchReport: the rows an `accel bench` collective sweep measured, printed as an nccl-tests-style
// table with a footer (average busbw, ratio to the raw baseline) and written as JSON
// (docs/benchmarks.md documents the fields).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "bench/lib/collective_kind.h"
#include "collective/reduce_op.h"

namespace accel::bench {

// One backend's numbers for one row.
struct Measurement {
  double time_us = 0;    // max over ranks of the median time per call
  double algbw_gbs = 0;  // bytes / time, in 1e9 bytes per second
  double busbw_gbs = 0;  // algbw * bus_bandwidth_factor
  int64_t wrong = 0;     // wrong elements, summed over ranks
};

struct BenchRow {
  int64_t bytes = 0;  // the size column: see MessageShape
  int64_t count = 0;  // elements in bytes
  DType dtype = DType::f32;
  bool reduces = true;  // false: the redop column reads "none"
  ReduceOp op = ReduceOp::sum;
  int root = -1;  // broadcast's root, -1 for the others
  bool in_place = false;
  std::vector<Measurement> results;  // one per column, in BenchReport::columns order
};

struct Column {
  std::string backend;   // "raw-mpi", "mpi", "ring"
  std::string baseline;  // the column it is compared with; "" for a baseline
  std::string call;      // what it runs: "MPI_Allreduce" or "accel mpi backend", for the header
};

struct BenchReport {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int ranks = 1;
  int warmup = 0;
  int iters = 0;
  std::string launcher;  // ProcessState::launcher: "openmpi", "slurm", ...
  std::vector<Column> columns;
  std::vector<BenchRow> rows;
};

// Sizes from this on count as "large" in the footer's second ratio.
inline constexpr int64_t kLargeBytes = int64_t{1} << 20;

// The footer's numbers for one column. Ratios are the mean over rows of busbw / the baseline's busbw
// (for a baseline column they are absent: has_ratio is false).
struct ColumnSummary {
  std::string backend;
  double avg_busbw_gbs = 0;  // mean over all rows
  int64_t wrong = 0;         // over all rows
  bool has_ratio = false;
  double ratio = 0;             // over all rows
  int large_rows = 0;           // rows of at least kLargeBytes
  double ratio_large = 0;       // over those rows (0 when there are none)
  double min_ratio_large = 0;   // the smallest of them
};
std::vector<ColumnSummary> summarize(const BenchReport& report);

void print_header(std::ostream& out, const BenchReport& report);
void print_row(std::ostream& out, const BenchReport& report, const BenchRow& row);
void print_footer(std::ostream& out, const BenchReport& report);

nlohmann::json to_json(const BenchReport& report);

}  // namespace accel::bench
