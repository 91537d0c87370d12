// The report of a sweep: footer numbers, the table's columns and the JSON fields, on a hand-made report.
#include <doctest/doctest.h>

#include <sstream>

#include "bench/lib/bench_report.h"

using namespace accel;
using namespace accel::bench;

namespace {

Measurement measured(double time_us, int64_t bytes, double factor, int64_t wrong = 0) {
  const double algbw = static_cast<double>(bytes) / (time_us * 1e-6) / 1e9;
  return Measurement{time_us, algbw, algbw * factor, wrong};
}

// raw-mpi and mpi on 4 ranks; mpi is half as fast at 1 KB, 0.9 and 1.0 times as fast at 1 MB and 4 MB.
BenchReport sample() {
  BenchReport r;
  r.kind = CollectiveKind::all_reduce;
  r.ranks = 4;
  r.warmup = 1;
  r.iters = 3;
  r.launcher = "openmpi";
  r.columns = {{"raw-mpi", "", "MPI_Allreduce"}, {"mpi", "raw-mpi", "accel mpi"}};
  const double f = 1.5;
  for (auto [bytes, raw_us, mpi_us, wrong] :
       {std::tuple<int64_t, double, double, int64_t>{1024, 10.0, 20.0, 0}, {1 << 20, 900.0, 1000.0, 0},
        {4 << 20, 4000.0, 4000.0, 7}}) {
    BenchRow row{bytes, bytes / 4, DType::f32, true, ReduceOp::avg, -1, false, {}};
    row.results = {measured(raw_us, bytes, f), measured(mpi_us, bytes, f, wrong)};
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace

TEST_CASE("summarize: average busbw, and the mean and minimum ratio to the baseline") {
  const BenchReport r = sample();
  const std::vector<ColumnSummary> s = summarize(r);
  REQUIRE(s.size() == 2);
  CHECK_FALSE(s[0].has_ratio);
  CHECK(s[1].has_ratio);
  const double raw_avg = (r.rows[0].results[0].busbw_gbs + r.rows[1].results[0].busbw_gbs +
                          r.rows[2].results[0].busbw_gbs) / 3;
  CHECK(s[0].avg_busbw_gbs == doctest::Approx(raw_avg));
  CHECK(s[1].ratio == doctest::Approx((0.5 + 0.9 + 1.0) / 3));
  CHECK(s[1].large_rows == 2);
  CHECK(s[1].ratio_large == doctest::Approx(0.95));
  CHECK(s[1].min_ratio_large == doctest::Approx(0.9));
  CHECK(s[1].wrong == 7);
  CHECK(s[0].wrong == 0);
}

TEST_CASE("the table: nccl-tests columns per backend, and a footer with the ratios") {
  const BenchReport r = sample();
  std::ostringstream out;
  print_header(out, r);
  for (const BenchRow& row : r.rows) print_row(out, r, row);
  print_footer(out, r);
  const std::string text = out.str();
  CHECK(text.find("busbw = algbw * 2(n-1)/n = algbw * 1.500") != std::string::npos);
  CHECK(text.find("#wrong") != std::string::npos);
  CHECK(text.find("raw-mpi") != std::string::npos);
  // The 1 KB row: size, count, type, redop, place, then raw-mpi's time 10.00 us.
  CHECK(text.find("        1024          256   f32    avg   out      10.00") != std::string::npos);
  CHECK(text.find("busbw ratio mpi / raw-mpi (mean of per-row ratios): all sizes 0.800, sizes >= 1 MB 0.950 "
                  "(min 0.900, 2 rows)") != std::string::npos);
  CHECK(text.find("#wrong in total: 7 FAILED") != std::string::npos);
}

TEST_CASE("to_json: the documented fields") {
  const nlohmann::json j = to_json(sample());
  for (const char* key : {"benchmark", "ranks", "launcher", "warmup", "iters", "time", "busbw_factor", "large_bytes",
                          "columns", "rows", "summary"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["benchmark"] == "allreduce");
  CHECK(j["busbw_factor"] == 1.5);
  CHECK(j["columns"][0]["baseline"].is_null());
  CHECK(j["columns"][1]["baseline"] == "raw-mpi");
  const nlohmann::json& row = j["rows"][2];
  CHECK(row["size_bytes"] == 4 << 20);
  CHECK(row["count"] == 1 << 20);
  CHECK(row["dtype"] == "f32");
  CHECK(row["redop"] == "avg");
  CHECK(row["root"] == -1);
  CHECK(row["in_place"] == false);
  CHECK(row["results"]["mpi"]["wrong"] == 7);
  CHECK(row["results"]["raw-mpi"]["time_us"] == 4000.0);
  for (const char* key : {"time_us", "algbw_gbs", "busbw_gbs", "wrong"}) CHECK(row["results"]["mpi"].contains(key));
  CHECK(j["summary"][1]["min_ratio_large"].get<double>() == doctest::Approx(0.9));
  CHECK_FALSE(j["summary"][0].contains("ratio"));
}
