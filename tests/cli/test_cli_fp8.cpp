// accel launch --mixed_precision fp8 and its recipe flags (Accelerate's names): the ranks get
// ACCEL_MIXED_PRECISION=fp8 and an ACCEL_FP8_* variable for each recipe field that differs from
// Transformer Engine's defaults, from the flags or the config file; a bad value is refused. Every
// command runs under `timeout`.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "cli_run.h"

using namespace cli_test;

TEST_CASE("accel launch --mixed_precision fp8 exports the precision and only the recipe fields that were changed") {
  Run r = run(fmt::format("{} launch --mixed_precision fp8 --dry-run -n 2 prog", kAccel));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, " -x ACCEL_MIXED_PRECISION=fp8 "));
  CHECK_FALSE(contains(r.output, "ACCEL_FP8_"));
  r = run(fmt::format("{} launch --mixed_precision fp8 --fp8_format E4M3 --fp8_margin 1 --fp8_amax_history_len 16 "
                      "--fp8_amax_compute_algo most_recent --dry-run -n 2 prog",
                      kAccel));
  INFO(r.output);
  CHECK(r.status == 0);
  for (const char* v : {" -x ACCEL_FP8_FORMAT=E4M3 ", " -x ACCEL_FP8_MARGIN=1 ", " -x ACCEL_FP8_AMAX_HISTORY_LEN=16 ",
                        " -x ACCEL_FP8_AMAX_COMPUTE_ALGO=most_recent "})
    CHECK(contains(r.output, v));
  const TempDir dir("fp8");
  const std::string config =
      dir.write("config.yaml", "num_processes: 2\nmixed_precision: fp8\nfp8_include_first_last: true\n");
  r = run(fmt::format("{} launch --config_file {} --dry-run prog", kAccel, config));
  INFO(r.output);
  CHECK(contains(r.output, " -x ACCEL_MIXED_PRECISION=fp8 "));
  CHECK(contains(r.output, " -x ACCEL_FP8_INCLUDE_FIRST_LAST=1 "));
  // The recipe fields mean nothing without fp8: not exported.
  r = run(fmt::format("{} launch --mixed_precision bf16 --fp8_margin 1 --dry-run -n 2 prog", kAccel));
  CHECK(r.status == 0);
  CHECK_FALSE(contains(r.output, "ACCEL_FP8_"));
  r = run(fmt::format("{} launch --mixed_precision fp8 --fp8_amax_history_len 0 --dry-run -n 2 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "--fp8_amax_history_len"));
  r = run(fmt::format("{} launch --mixed_precision fp4 --dry-run -n 2 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "--mixed_precision"));
}
