// A tiny sweep of every collective on the real backends (raw MPI, accel mpi, accel ring), run on
// every rank: each result is right, #wrong counts injected errors exactly over all ranks, the rows
// obey algbw = size / time and busbw = algbw * factor, and the JSON has the fields docs/benchmarks.md
// documents.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mpi.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "bench/lib/bench_check.h"
#include "bench/lib/collective_bench.h"
#include "bench/lib/raw_mpi_backend.h"
#include "collective/mpi_communicator.h"
#include "collective/ring_communicator.h"
#include "tensor/nograd/views.h"

using namespace accel;
using namespace accel::bench;

namespace {

constexpr CollectiveKind kKinds[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                     CollectiveKind::reduce_scatter, CollectiveKind::broadcast};

// The communicators and backends of one test, built and torn down together on every rank.
struct Fixture {
  RawMpiBackend raw{MPI_COMM_WORLD};
  MpiCommunicator control{MPI_COMM_WORLD};
  MpiCommunicator mpi{MPI_COMM_WORLD};
  RingCommunicator ring{std::make_shared<MpiCommunicator>(MPI_COMM_WORLD)};
  CommunicatorBackend mpi_column{mpi, Device::cpu(), "raw-mpi"};
  CommunicatorBackend ring_column{ring, Device::cpu(), "raw-mpi"};
  std::vector<BenchBackend*> backends() { return {&raw, &mpi_column, &ring_column}; }
};

// Runs the real call, then breaks up to three elements of this rank's result: the first, the middle
// and the last one.
class Corrupting final : public BenchBackend {
 public:
  explicit Corrupting(BenchBackend& inner) : inner_(inner) {}
  std::string name() const override { return "corrupting"; }
  std::string baseline() const override { return inner_.name(); }
  Device device() const override { return inner_.device(); }
  void run(const BenchCall& call) override {
    inner_.run(call);
    const Tensor r = inner_.result(call);
    for (int64_t i : positions(r.numel())) poison(nograd::narrow(r, 0, i, 1));
  }
  Tensor result(const BenchCall& call) const override { return inner_.result(call); }
  static std::vector<int64_t> positions(int64_t n) {
    std::vector<int64_t> p;
    for (int64_t i : {int64_t{0}, n / 2, n - 1})
      if (i >= 0 && i < n && (p.empty() || p.back() != i)) p.push_back(i);
    return p;
  }

 private:
  BenchBackend& inner_;
};

BenchOptions tiny(CollectiveKind kind) {
  BenchOptions o;
  o.kind = kind;
  o.min_bytes = 8;
  o.max_bytes = 64 << 10;
  o.factor = 8;
  o.dtypes = {DType::f32, DType::bf16, DType::i32};
  o.ops = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
  o.warmup = 1;
  o.iters = 2;
  return o;
}

// Every `key` of j (recursively, except inside "results", whose keys are backend names) as "`key`".
void collect_keys(const nlohmann::json& j, std::vector<std::string>& keys) {
  if (j.is_array()) {
    for (const auto& e : j) collect_keys(e, keys);
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      keys.push_back(key);
      if (key == "results") {
        for (const auto& [backend, m] : value.items()) collect_keys(m, keys);
      } else {
        collect_keys(value, keys);
      }
    }
  }
}

}  // namespace

TEST_CASE("sweep: every collective, dtype, op and placement is exact on every backend") {
  Fixture f;
  const int ranks = f.control.size();
  for (CollectiveKind kind : kKinds) {
    const BenchOptions o = tiny(kind);
    BenchReport report = new_report(o, f.backends(), ranks);
    run_collective_bench(o, f.backends(), f.control, report);
    // 8 B .. 64 KB by x8 is 6 sizes; some are too small to give each rank an element.
    CHECK(report.rows.size() > 0);
    for (const BenchRow& row : report.rows) {
      INFO(fmt::format("{} {} B {} {} {}", collective_command(kind), row.bytes, dtype_name(row.dtype),
                       reduce_op_name(row.op), row.in_place ? "in place" : "out of place"));
      REQUIRE(row.results.size() == 3);
      CHECK(row.bytes == row.count * static_cast<int64_t>(dtype_size(row.dtype)));
      for (const Measurement& m : row.results) {
        CHECK(m.wrong == 0);
        CHECK(m.time_us > 0);
        CHECK(m.algbw_gbs == doctest::Approx(static_cast<double>(row.bytes) / (m.time_us * 1e-6) / 1e9));
        CHECK(m.busbw_gbs == doctest::Approx(m.algbw_gbs * bus_bandwidth_factor(kind, ranks)));
      }
    }
    // Broadcast is in place only; the others have both placements of each size.
    const bool both = kind != CollectiveKind::broadcast;
    CHECK(report.rows.size() % (both ? 2 : 1) == 0);
  }
}

TEST_CASE("sweep: #wrong is the number of corrupted elements over all ranks, exactly") {
  Fixture f;
  const int ranks = f.control.size();
  Corrupting corrupting(f.raw);
  const std::vector<BenchBackend*> backends = {&f.raw, &corrupting};
  for (CollectiveKind kind : kKinds) {
    BenchOptions o = tiny(kind);
    o.dtypes = {DType::f16};
    o.ops = {ReduceOp::sum};
    BenchReport report = new_report(o, backends, ranks);
    run_collective_bench(o, backends, f.control, report);
    for (const BenchRow& row : report.rows) {
      INFO(fmt::format("{} {} B {}", collective_command(kind), row.bytes, row.in_place ? "in place" : "out of place"));
      // Every rank's result has the output's element count, and every rank breaks the same positions.
      const MessageShape shape = message_shape(kind, row.bytes, row.dtype, ranks);
      const auto broken = static_cast<int64_t>(Corrupting::positions(shape.out_count).size());
      CHECK(row.results[0].wrong == 0);
      CHECK(row.results[1].wrong == broken * ranks);
    }
  }
}

TEST_CASE("the JSON: documented fields, parsed back with nlohmann") {
  Fixture f;
  BenchOptions o = tiny(CollectiveKind::all_reduce);
  o.dtypes = {DType::f32};
  o.ops = {ReduceOp::sum};
  BenchReport report = new_report(o, f.backends(), f.control.size());
  report.launcher = "openmpi";
  run_collective_bench(o, f.backends(), f.control, report);
  const nlohmann::json j = nlohmann::json::parse(to_json(report).dump(1));

  CHECK(j["benchmark"] == "allreduce");
  CHECK(j["ranks"] == f.control.size());
  CHECK(j["warmup"] == 1);
  CHECK(j["iters"] == 2);
  CHECK(j["columns"].size() == 3);
  CHECK(j["columns"][0]["backend"] == "raw-mpi");
  CHECK(j["columns"][0]["call"] == "MPI_Allreduce");
  CHECK(j["columns"][2]["backend"] == "ring");
  CHECK(j["rows"].size() == report.rows.size());
  for (const auto& row : j["rows"]) {
    CHECK(row["size_bytes"].is_number_integer());
    CHECK(row["count"].is_number_integer());
    CHECK(row["dtype"] == "f32");
    CHECK(row["redop"] == "sum");
    CHECK(row["in_place"].is_boolean());
    for (const char* backend : {"raw-mpi", "mpi", "ring"}) {
      const auto& m = row["results"][backend];
      CHECK(m["time_us"].is_number());
      CHECK(m["algbw_gbs"].is_number());
      CHECK(m["busbw_gbs"].is_number());
      CHECK(m["wrong"] == 0);
    }
  }
  CHECK(j["summary"].size() == 3);
  CHECK(j["summary"][1]["backend"] == "mpi");
  CHECK(j["summary"][1]["ratio"].is_number());

  // Every field name appears in docs/benchmarks.md, written as `name`.
  std::ifstream doc(ACCEL_DOCS_DIR "/benchmarks.md");
  REQUIRE(doc);
  std::stringstream text;
  text << doc.rdbuf();
  std::vector<std::string> keys;
  collect_keys(j, keys);
  for (const std::string& key : keys) CHECK_MESSAGE(text.str().find("`" + key + "`") != std::string::npos, key);
}
