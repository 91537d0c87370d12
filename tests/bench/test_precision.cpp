// accel bench precision: the step's FLOP count, the published-peak lookup, and a tiny run on the CPU
// whose rows carry their references and whose JSON has the documented fields.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "bench/lib/precision_bench.h"
#include "bench/lib/precision_report.h"
#include "runtime/published_peaks.h"

using namespace accel;
using namespace accel::bench;

namespace {

void collect_keys(const nlohmann::json& j, std::vector<std::string>& keys) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys.push_back(it.key());
      collect_keys(it.value(), keys);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_keys(v, keys);
  }
}

PrecisionOptions tiny() {
  PrecisionOptions o;
  o.devices = {Device::cpu()};
  o.gemm_sizes = {16, 32};
  o.elements = 4096;
  o.mlp_widths = {8, 16, 4};
  o.mlp_batch = 4;
  o.warmup = 0;
  o.iters = 1;
  return o;
}

}  // namespace

TEST_CASE("mlp_step_flops: 2 M K N for the forward and weight-grad GEMMs of every layer, input grads past the first") {
  // Layer 8->16: forward and weight grad, 2 * 4*8*16 each; layer 16->4: also the input grad.
  CHECK(mlp_step_flops({8, 16, 4}, 4) == 2.0 * (2 * 4 * 8 * 16) + 3.0 * (2 * 4 * 16 * 4));
  CHECK(mlp_step_flops({784, 1024, 1024, 10}, 256) ==
        2.0 * 256 * (2.0 * 784 * 1024 + 3.0 * 1024 * 1024 + 3.0 * 1024 * 10));
}

TEST_CASE("published_peaks: the dense datasheet figures of known GPUs, matched by the driver's name") {
  const auto h200 = published_peaks("NVIDIA H200");
  REQUIRE(h200);
  CHECK(h200->gpu == "H200 SXM");
  CHECK(h200->bf16_tflops == 989.4);
  CHECK(h200->f32_tflops == 67.0);
  CHECK(h200->memory_gbs == 4800.0);
  CHECK(gemm_peak_gflops(*h200, "bf16") == doctest::Approx(989400.0));
  CHECK(gemm_peak_gflops(*h200, "f32") == doctest::Approx(67000.0));
  CHECK(gemm_peak_gflops(*h200, "i32") == 0);
  CHECK(gemm_peak_gflops(*h200, "f8_e4m3") == doctest::Approx(1978900.0));  // 3,958 with sparsity, halved
  CHECK(gemm_peak_gflops(*published_peaks("NVIDIA A100-SXM4-80GB"), "f8_e4m3") == 0);  // no FP8 tensor cores
  CHECK(published_peaks("NVIDIA H100 PCIe")->gpu == "H100 PCIe");
  CHECK(published_peaks("NVIDIA H100 80GB HBM3")->gpu == "H100 SXM");
  CHECK(published_peaks("NVIDIA A100-SXM4-80GB")->gpu == "A100 SXM 80GB");
  CHECK_FALSE(published_peaks("NVIDIA GeForce RTX 4090"));
}

TEST_CASE("a tiny CPU run: every row measured, shown against the reference measured in the same run") {
  const PrecisionOptions o = tiny();
  int seen = 0;
  const PrecisionReport r = run_precision_bench(o, [&](const PrecisionRow&) { ++seen; });
  // Per GEMM size: Eigen, three dtypes and the FP8 GEMM, then the Linear in f32, bf16 and fp8; memcpy,
  // add and mul in three dtypes; unscale in three dtypes; four casts; a step per mixed_precision (no,
  // fp16, bf16, fp8).
  REQUIRE(r.rows.size() == 2 * (5 + 3) + 7 + 3 + 4 + 4);
  CHECK(seen == static_cast<int>(r.rows.size()));
  REQUIRE(r.devices.size() == 1);
  CHECK(r.devices[0].device == "cpu");
  CHECK(r.devices[0].reference == "measured");

  double eigen = 0, memcpy_gbs = 0, f32_linear = 0;
  int fp8_rows = 0;
  for (const PrecisionRow& row : r.rows) {
    INFO(row.group, " ", row.name, " ", row.dtype, " ", row.shape, " ", row.note);
    CHECK(row.device == "cpu");
    if (row.name == "eigen f32 gemm") eigen = row.rate;
    if (row.name == "memcpy") memcpy_gbs = row.rate;
    if (!row.available) {
      // Only a mixed-precision step may be unavailable (before the Accelerator supports it), and it says why.
      CHECK(row.group == "train_step");
      CHECK(row.dtype != "f32");
      CHECK_FALSE(row.note.empty());
      continue;
    }
    CHECK(row.time_us > 0);
    CHECK(row.rate > 0);
    if (row.group == "gemm") {
      CHECK(row.unit == "GFLOP/s");
      CHECK(row.reference == eigen);  // the Eigen row of the same size comes first
      const double n = std::stod(row.shape);
      CHECK(row.rate == doctest::Approx(2 * n * n * n / (row.time_us * 1e-6) / 1e9));
      if (row.name == "fp8 gemm") {
        ++fp8_rows;
        CHECK(row.dtype == "f8_e4m3");
        CHECK(row.note.find("emulated") != std::string::npos);
        CHECK(row.note.find("x the bf16 matmul") != std::string::npos);
      }
    } else if (row.group == "fp8_linear") {
      // One Linear's forward and backward: three GEMMs of 2 n^3; the f32 row (first per size) is the reference.
      CHECK(row.unit == "GFLOP/s");
      const double n = std::stod(row.shape);
      CHECK(row.rate == doctest::Approx(6 * n * n * n / (row.time_us * 1e-6) / 1e9));
      if (row.dtype == "f32") f32_linear = row.rate;
      CHECK(row.reference == f32_linear);
      if (row.dtype == "f8_e4m3") {
        ++fp8_rows;
        CHECK(row.note.find("emulated") != std::string::npos);
      }
    } else if (row.group == "train_step") {
      CHECK(row.unit == "GFLOP/s");
      CHECK(row.rate == doctest::Approx(mlp_step_flops(o.mlp_widths, o.mlp_batch) / (row.time_us * 1e-6) / 1e9));
      CHECK(row.reference > 0);
    } else {
      CHECK(row.unit == "GB/s");
      CHECK(row.reference == memcpy_gbs);
    }
    CHECK(row.fraction() == doctest::Approx(row.rate / row.reference));
  }
  CHECK(eigen > 0);
  CHECK(memcpy_gbs > 0);
  CHECK(fp8_rows == 4);  // both sizes, GEMM and Linear: measured, not skipped
}

TEST_CASE("to_json: the documented fields, with null where a row has no number") {
  PrecisionReport r = run_precision_bench(tiny());
  r.rows.push_back({"cpu", "train_step", "mlp step", "f16", "8-16-4 b4", 0, 0, "GFLOP/s", 0, "", false, "why"});
  const nlohmann::json j = nlohmann::json::parse(to_json(r).dump(1));
  CHECK(j["benchmark"] == "precision");
  CHECK(j["threads"].is_number_integer());
  CHECK(j["warmup"] == 0);
  CHECK(j["iters"] == 1);
  CHECK(j["devices"][0]["device"] == "cpu");
  CHECK(j["devices"][0]["reference"] == "measured");
  REQUIRE(j["rows"].size() == r.rows.size());
  const auto& first = j["rows"][0];
  CHECK(first["group"] == "gemm");
  CHECK(first["name"] == "eigen f32 gemm");
  CHECK(first["available"] == true);
  CHECK(first["time_us"].is_number());
  CHECK(first["rate"].is_number());
  CHECK(first["reference"].is_number());
  CHECK(first["fraction"] == doctest::Approx(1.0));
  const auto& last = j["rows"].back();
  CHECK(last["available"] == false);
  CHECK(last["rate"].is_null());
  CHECK(last["time_us"].is_null());
  CHECK(last["reference"].is_null());
  CHECK(last["fraction"].is_null());
  CHECK(last["note"] == "why");

  std::ifstream doc(ACCEL_DOCS_DIR "/benchmarks.md");
  REQUIRE(doc);
  std::stringstream text;
  text << doc.rdbuf();
  std::vector<std::string> keys;
  collect_keys(j, keys);
  for (const std::string& key : keys) CHECK_MESSAGE(text.str().find("`" + key + "`") != std::string::npos, key);
}
