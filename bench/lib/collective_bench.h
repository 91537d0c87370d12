// The collective sweep behind `accel bench allreduce|allgather|reducescatter|broadcast`: for each
// dtype, reduce op, message size and placement, time every backend on the same buffers, check each
// result exactly, and reduce the numbers over ranks into one BenchRow.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/lib/bench_backend.h"
#include "bench/lib/bench_report.h"
#include "collective/communicator.h"

namespace accel::bench {

struct BenchOptions {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int64_t min_bytes = 8;                       // -b
  int64_t max_bytes = int64_t{256} << 20;      // -e
  int64_t factor = 2;                          // -f
  std::vector<DType> dtypes = {DType::f32};
  std::vector<ReduceOp> ops = {ReduceOp::sum};  // all-reduce and reduce-scatter only
  bool out_of_place = true;
  bool in_place = true;
  int warmup = 5;  // untimed calls per backend and row
  int iters = 20;  // timed calls per backend and row
  int root = 0;    // broadcast
};

// "8", "64K", "256M", "1G" (binary multiples, as in nccl-tests) as bytes; throws accel::Error.
int64_t parse_byte_size(const std::string& text);
// min, min * factor, ... up to max (inclusive).
std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor);
// Throws accel::Error naming the option when options cannot run on `ranks` ranks.
void validate(const BenchOptions& options, int ranks);

// A report with the sweep's description (kind, ranks, counts, one column per backend) and no rows
// yet: what print_header needs before the first row is measured.
BenchReport new_report(const BenchOptions& options, const std::vector<BenchBackend*>& backends, int ranks);

// Runs the sweep and appends its rows to report (made by new_report with the same options and
// backends). Collective: every rank calls it with the same options and backends, in the same order.
// control carries the barriers before each timed block and the reductions of times and #wrong over
// ranks; it is not one of the measured backends. on_row, if set, sees each row as soon as it is
// complete (every rank gets the same rows), so rank 0 can print the table as it grows.
void run_collective_bench(const BenchOptions& options, const std::vector<BenchBackend*>& backends,
                          Communicator& control, BenchReport& report,
                          const std::function<void(const BenchRow&)>& on_row = {});

}  // namespace accel::bench
