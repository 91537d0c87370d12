// The collective sweep: buffers per row, a checked call and warm-up per backend, timed calls taking
// turns between the backends, and the reduction of times (max of the medians) and #wrong (sum) over ranks.
#include "bench/lib/collective_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>

#include "bench/lib/bench_check.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

namespace accel::bench {

namespace {

// The tensors of one call, laid out as BenchCall describes, over buffers in_buf and out_buf.
BenchCall make_call(CollectiveKind kind, const MessageShape& shape, const Tensor& in_buf, const Tensor& out_buf,
                    bool in_place, ReduceOp op, int root, int rank) {
  BenchCall call{kind, in_buf, out_buf, op, root, in_place};
  switch (kind) {
    case CollectiveKind::all_reduce:
      if (in_place) call.in = out_buf;
      break;
    case CollectiveKind::all_gather:
      if (in_place) call.in = nograd::narrow(out_buf, 0, rank * shape.part, shape.part);
      break;
    case CollectiveKind::reduce_scatter:
      if (in_place) call.out = nograd::narrow(in_buf, 0, rank * shape.part, shape.part);
      break;
    case CollectiveKind::broadcast: call.in = out_buf; break;
  }
  return call;
}

// Inputs in place and every output element poisoned, so the check sees only what the call wrote.
void prepare_inputs(const CheckCase& c, const BenchCall& call) {
  if (!call.in_place || call.kind == CollectiveKind::all_gather) poison(call.out);
  fill_input(c, call.in);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every backend on one row: each one's checked call (its #wrong on this rank, in wrong) and warm-up,
// then `iters` rounds that time one call of each backend in turn. Returns each backend's median call
// time on this rank. Taking turns puts every backend under the same load as the others, and the
// median drops the calls that other processes on a shared machine preempted.
std::vector<double> measure(const std::vector<BenchBackend*>& backends, const BenchCall& call, const CheckCase& c,
                            const BenchOptions& options, Communicator& control, std::vector<int64_t>& wrong) {
  const size_t columns = backends.size();
  wrong.assign(columns, 0);
  for (size_t b = 0; b < columns; ++b) {
    prepare_inputs(c, call);
    backends[b]->run(call);
    wrong[b] = count_wrong(c, backends[b]->result(call));
    for (int i = 0; i < options.warmup; ++i) backends[b]->run(call);
  }
  control.barrier();  // all ranks start the timed calls together
  std::vector<std::vector<double>> times(columns);
  for (int i = 0; i < options.iters; ++i) {
    for (size_t b = 0; b < columns; ++b) {
      const auto start = std::chrono::steady_clock::now();
      backends[b]->run(call);
      times[b].push_back(seconds_since(start));
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::sort(t.begin(), t.end());
    const size_t n = t.size();
    medians.push_back(n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
  }
  return medians;
}

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  const auto bad = [&] {
    return Error(fmt::format("bench: size '{}' is not a byte count; expected a whole number with an optional K, M "
                             "or G (binary multiples), e.g. 8, 64K, 256M",
                             text));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) throw bad();
  int64_t value = std::stoll(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  if (suffix == "K" || suffix == "k") value <<= 10;
  else if (suffix == "M" || suffix == "m") value <<= 20;
  else if (suffix == "G" || suffix == "g") value <<= 30;
  else if (!suffix.empty()) throw bad();
  return value;
}

std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  if (min_bytes < 1 || max_bytes < min_bytes || factor < 2)
    throw Error(fmt::format("bench: sizes from {} to {} by x{}; expected 1 <= min <= max and a factor of at least 2",
                            min_bytes, max_bytes, factor));
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > std::numeric_limits<int64_t>::max() / factor) break;
  }
  return sizes;
}

void validate(const BenchOptions& o, int ranks) {
  sweep_sizes(o.min_bytes, o.max_bytes, o.factor);
  if (o.warmup < 0) throw Error(fmt::format("bench: --warmup {}; expected 0 or more", o.warmup));
  if (o.iters < 1) throw Error(fmt::format("bench: --iters {}; expected 1 or more", o.iters));
  if (o.dtypes.empty()) throw Error("bench: no dtypes given; expected some of f64, f32, f16, bf16, i64, i32");
  if (reduces(o.kind) && o.ops.empty()) throw Error("bench: no reduce ops given; expected some of sum, avg, max, min");
  if (!o.in_place && !o.out_of_place) throw Error("bench: neither in-place nor out-of-place calls selected");
  if (o.kind == CollectiveKind::broadcast && (o.root < 0 || o.root >= ranks))
    throw Error(fmt::format("bench: --root {} out of range for {} ranks", o.root, ranks));
  for (DType dtype : o.dtypes) check_exact(dtype, ranks);
}

BenchReport new_report(const BenchOptions& options, const std::vector<BenchBackend*>& backends, int ranks) {
  BenchReport report;
  report.kind = options.kind;
  report.ranks = ranks;
  report.warmup = options.warmup;
  report.iters = options.iters;
  for (BenchBackend* b : backends) {
    const bool raw = b->baseline().empty();
    report.columns.push_back(Column{b->name(), b->baseline(), raw ? mpi_call_name(options.kind) : "accel " + b->name()});
  }
  return report;
}

void run_collective_bench(const BenchOptions& options, const std::vector<BenchBackend*>& backends,
                          Communicator& control, BenchReport& report,
                          const std::function<void(const BenchRow&)>& on_row) {
  const int ranks = control.size(), rank = control.rank();
  validate(options, ranks);
  if (backends.empty()) throw Error("bench: no backends to measure");
  if (report.columns.size() != backends.size() || report.ranks != ranks)
    throw Error(fmt::format("bench: the report has {} columns for {} ranks, but there are {} backends on {} ranks; "
                            "make it with new_report",
                            report.columns.size(), report.ranks, backends.size(), ranks));
  for (BenchBackend* b : backends)
    if (!b->device().is_cpu())
      throw Error(fmt::format("bench: backend '{}' works on {}, but the sweep fills and checks CPU buffers only",
                              b->name(), b->device().str()));

  std::vector<bool> placements;
  if (options.out_of_place && has_out_of_place(options.kind)) placements.push_back(false);
  if (options.in_place) placements.push_back(true);
  // Broadcast has no out-of-place form; asking only for that gives an empty table, which is allowed.
  const std::vector<ReduceOp> ops = reduces(options.kind) ? options.ops : std::vector<ReduceOp>{ReduceOp::sum};
  const double factor = bus_bandwidth_factor(options.kind, ranks);
  const int columns = static_cast<int>(backends.size());

  for (DType dtype : options.dtypes) {
    for (ReduceOp op : ops) {
      int64_t previous = -1;
      for (int64_t bytes : sweep_sizes(options.min_bytes, options.max_bytes, options.factor)) {
        const MessageShape shape = message_shape(options.kind, bytes, dtype, ranks);
        if (shape.count == 0 || shape.bytes == previous) continue;  // rounding made it empty or a repeat
        previous = shape.bytes;
        // One pair of buffers per row, shared by every backend (and both placements).
        const Tensor in_buf = empty({shape.in_count}, dtype);
        const Tensor out_buf = empty({shape.out_count}, dtype);
        const CheckCase check{options.kind, dtype, op, ranks, rank, options.root};
        for (bool in_place : placements) {
          const BenchCall call = make_call(options.kind, shape, in_buf, out_buf, in_place, op, options.root, rank);
          // Over ranks: the slowest rank's time, and every rank's wrong elements.
          const Tensor seconds = empty({columns}, DType::f64);
          const Tensor wrong = empty({columns}, DType::i64);
          std::vector<int64_t> wrong_here;
          const std::vector<double> medians = measure(backends, call, check, options, control, wrong_here);
          for (int c = 0; c < columns; ++c) {
            seconds.data<double>()[c] = medians[static_cast<size_t>(c)];
            wrong.data<int64_t>()[c] = wrong_here[static_cast<size_t>(c)];
          }
          control.all_reduce(seconds, ReduceOp::max);
          control.all_reduce(wrong, ReduceOp::sum);

          BenchRow row{shape.bytes, shape.count, dtype, reduces(options.kind), op,
                       options.kind == CollectiveKind::broadcast ? options.root : -1, in_place, {}};
          for (int c = 0; c < columns; ++c) {
            Measurement m;
            const double s = seconds.data<double>()[c];
            m.time_us = s * 1e6;
            m.algbw_gbs = s > 0 ? static_cast<double>(shape.bytes) / s / 1e9 : 0;
            m.busbw_gbs = m.algbw_gbs * factor;
            m.wrong = wrong.data<int64_t>()[c];
            row.results.push_back(m);
          }
          report.rows.push_back(row);
          if (on_row) on_row(report.rows.back());
        }
      }
    }
  }
}

}  // namespace accel::bench
