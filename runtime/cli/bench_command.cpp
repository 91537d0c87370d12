// accel bench: parses the sweep's options, brings up MPI and the backends, and prints the table.
#include "runtime/cli/bench_command.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "accel_config.h"
#include "bench/lib/collective_bench.h"
#include "bench/lib/precision_report.h"
#include "kernels/error.h"
#include "runtime/process_state.h"
#if ACCEL_WITH_MPI
#include <mpi.h>

#include "bench/lib/raw_mpi_backend.h"
#include "collective/mpi_communicator.h"
#include "collective/mpi_environment.h"
#include "collective/ring_communicator.h"
#endif

namespace accel {

namespace {

std::vector<DType> parse_dtypes(const std::vector<std::string>& names) {
  if (names.size() == 1 && names[0] == "all")
    return {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32};
  std::vector<DType> dtypes;
  for (const std::string& name : names) {
    const DType dtype = parse_dtype(name);
    if (dtype == DType::boolean)
      throw Error("accel bench: --dtypes bool is not benchmarked; expected f64, f32, f16, bf16, i64, i32 or all");
    dtypes.push_back(dtype);
  }
  return dtypes;
}

std::vector<ReduceOp> parse_ops(const std::vector<std::string>& names) {
  if (names.size() == 1 && names[0] == "all") return {std::begin(kAllReduceOps), std::end(kAllReduceOps)};
  std::vector<ReduceOp> ops;
  for (const std::string& name : names) {
    bool known = false;
    for (ReduceOp op : kAllReduceOps) {
      if (name == reduce_op_name(op)) {
        ops.push_back(op);
        known = true;
      }
    }
    if (!known) throw Error(fmt::format("accel bench: --ops '{}' is unknown; expected sum, avg, max, min or all", name));
  }
  return ops;
}

}  // namespace

BenchCommand::BenchCommand(CLI::App& app) {
  bench_ = app.add_subcommand("bench",
                              "Measure collectives (nccl-tests-style tables of time, algbw, busbw, #wrong) and "
                              "mixed-precision arithmetic");
  bench_->require_subcommand(1);
  bench_->footer("Run under a launcher for more ranks: accel launch -n 4 accel bench allreduce (or mpirun, srun).");
  for (bench::CollectiveKind kind : {bench::CollectiveKind::all_reduce, bench::CollectiveKind::all_gather,
                                     bench::CollectiveKind::reduce_scatter, bench::CollectiveKind::broadcast}) {
    CLI::App* sub = bench_->add_subcommand(
        bench::collective_command(kind),
        fmt::format("Sweep message sizes of {}: every accel backend against {}", bench::collective_command(kind),
                    bench::mpi_call_name(kind)));
    sub->add_option("-b,--minbytes", min_bytes_, "Smallest size in bytes (K, M, G: binary multiples)")
        ->capture_default_str();
    sub->add_option("-e,--maxbytes", max_bytes_, "Largest size in bytes")->capture_default_str();
    sub->add_option("-f,--stepfactor", factor_, "Multiply the size by this between rows")->capture_default_str();
    sub->add_option("--dtypes", dtypes_, "Comma-separated: f64,f32,f16,bf16,i64,i32, or all")
        ->delimiter(',')
        ->capture_default_str();
    if (bench::reduces(kind))
      sub->add_option("--ops", ops_, "Comma-separated reduce ops: sum,avg,max,min, or all")
          ->delimiter(',')
          ->capture_default_str();
    if (bench::has_out_of_place(kind)) {
      sub->add_flag("--inplace", only_in_place_, "Only in-place calls (default: both)");
      sub->add_flag("--outofplace", only_out_of_place_, "Only out-of-place calls (default: both)");
    } else {
      sub->add_option("-r,--root", root_, "Broadcast root")->capture_default_str();
    }
    sub->add_option("-w,--warmup", warmup_, "Untimed calls per backend and row")->capture_default_str();
    sub->add_option("-n,--iters", iters_, "Timed calls per backend and row")->capture_default_str();
    sub->add_option("--backends", backends_, "Comma-separated accel backends: mpi,ring (the raw library always runs)")
        ->delimiter(',')
        ->capture_default_str();
    sub->add_option("--json", json_path_, "Also write the rows to this JSON file (rank 0)");
    collectives_.emplace_back(sub, kind);
  }

  precision_ = bench_->add_subcommand(
      "precision", "GEMM (FP8 too), Linear, elementwise, cast and training-step rates per dtype and device, next to the "
      "device's peak");
  precision_->add_option("--devices", devices_, "Comma-separated devices (default: cpu and every visible GPU)")
      ->delimiter(',');
  precision_->add_option("--gemm-sizes", gemm_sizes_, "Comma-separated square GEMM sizes")
      ->delimiter(',')
      ->capture_default_str();
  precision_->add_option("--elements", elements_, "Elements per tensor in the bandwidth rows")->capture_default_str();
  precision_->add_option("--widths", widths_, "MLP widths for the training step, inputs first")
      ->delimiter(',')
      ->capture_default_str();
  precision_->add_option("--batch", batch_, "MLP batch for the training step")->capture_default_str();
  precision_->add_option("-w,--warmup", precision_warmup_, "Untimed runs per row")->capture_default_str();
  precision_->add_option("-n,--iters", precision_iters_, "Timed runs per row (the row shows their median)")
      ->capture_default_str();
  precision_->add_option("--json", json_path_, "Also write the rows to this JSON file");
}

int BenchCommand::run_precision() {
  bench::PrecisionOptions options;
  if (devices_.empty()) {
    options.devices = {Device::cpu()};
    for (int i = 0; i < cuda_device_count(); ++i) options.devices.push_back(Device::cuda(i));
  } else {
    options.devices.clear();
    for (const std::string& d : devices_) options.devices.push_back(Device::parse(d));
  }
  options.gemm_sizes = gemm_sizes_;
  options.elements = elements_;
  options.mlp_widths = widths_;
  options.mlp_batch = batch_;
  options.warmup = precision_warmup_;
  options.iters = precision_iters_;
  const ProcessState process = ProcessState::from_environment();
  if (process.world_size > 1)
    throw Error(fmt::format("accel bench precision: launched as rank {} of {}; it measures one process's devices, "
                            "so start it without a launcher",
                            process.rank, process.world_size));
  std::cout << fmt::format("# accel bench precision: median of {} runs after {} warm-up per row\n", options.iters,
                           options.warmup);
  bench::print_precision_columns(std::cout);
  const bench::PrecisionReport report = bench::run_precision_bench(
      options, [&](const bench::PrecisionRow& row) { bench::print_precision_row(std::cout, row); });
  bench::print_precision_footer(std::cout, report);
  if (!json_path_.empty()) {
    std::ofstream file(json_path_);
    if (!file) throw Error(fmt::format("accel bench: cannot open --json file '{}' for writing", json_path_));
    file << bench::to_json(report).dump(1) << "\n";
    if (!file) throw Error(fmt::format("accel bench: writing --json file '{}' failed", json_path_));
    std::cout << fmt::format("# wrote {}\n", json_path_);
  }
  return 0;
}

bool BenchCommand::selected() const { return bench_->parsed(); }

int BenchCommand::run() {
  if (precision_->parsed()) return run_precision();
  bench::BenchOptions options;
  for (const auto& [sub, kind] : collectives_)
    if (sub->parsed()) options.kind = kind;
  options.min_bytes = bench::parse_byte_size(min_bytes_);
  options.max_bytes = bench::parse_byte_size(max_bytes_);
  options.factor = factor_;
  options.dtypes = parse_dtypes(dtypes_);
  options.ops = parse_ops(ops_);
  // Neither flag, or both: both placements.
  options.in_place = only_in_place_ || !only_out_of_place_;
  options.out_of_place = only_out_of_place_ || !only_in_place_;
  options.warmup = warmup_;
  options.iters = iters_;
  options.root = root_;
  for (const std::string& b : backends_)
    if (b != "mpi" && b != "ring")
      throw Error(fmt::format("accel bench: --backends '{}' is unknown; expected mpi or ring", b));
  const auto wants = [&](const char* name) {
    for (const std::string& b : backends_)
      if (b == name) return true;
    return false;
  };

#if ACCEL_WITH_MPI
  // MPI first, so that everything built on it is gone before it finalises.
  MpiEnvironment environment;
  bench::RawMpiBackend raw(MPI_COMM_WORLD);
  MpiCommunicator control(MPI_COMM_WORLD);
  std::unique_ptr<MpiCommunicator> mpi;
  std::unique_ptr<RingCommunicator> ring;
  std::vector<std::unique_ptr<bench::CommunicatorBackend>> accel_columns;
  if (wants("mpi")) {
    mpi = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
    accel_columns.push_back(std::make_unique<bench::CommunicatorBackend>(*mpi, Device::cpu(), raw.name()));
  }
  if (wants("ring")) {
    ring = std::make_unique<RingCommunicator>(std::make_shared<MpiCommunicator>(MPI_COMM_WORLD));
    accel_columns.push_back(std::make_unique<bench::CommunicatorBackend>(*ring, Device::cpu(), raw.name()));
  }
  std::vector<bench::BenchBackend*> backends = {&raw};
  for (const auto& column : accel_columns) backends.push_back(column.get());

  bench::validate(options, control.size());  // before the header, so a bad option prints only its error
  const bool printing = control.rank() == 0;
  bench::BenchReport report = bench::new_report(options, backends, control.size());
  report.launcher = ProcessState::from_environment().launcher;
  if (printing) bench::print_header(std::cout, report);
  bench::run_collective_bench(options, backends, control, report, [&](const bench::BenchRow& row) {
    if (printing) bench::print_row(std::cout, report, row);
  });
  int64_t wrong = 0;
  for (const bench::BenchRow& row : report.rows)
    for (const bench::Measurement& m : row.results) wrong += m.wrong;
  if (printing) {
    bench::print_footer(std::cout, report);
    if (!json_path_.empty()) {
      std::ofstream file(json_path_);
      if (!file) throw Error(fmt::format("accel bench: cannot open --json file '{}' for writing", json_path_));
      file << bench::to_json(report).dump(1) << "\n";
      if (!file) throw Error(fmt::format("accel bench: writing --json file '{}' failed", json_path_));
      std::cout << fmt::format("# wrote {}\n", json_path_);
    }
  }
  return wrong == 0 ? 0 : 1;
#else
  (void)wants;
  throw Error("accel bench: this accel was built without MPI (meson option mpi), which every collective backend needs");
#endif
}

}  // namespace accel
