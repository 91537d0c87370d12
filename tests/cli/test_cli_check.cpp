// accel launch --check (the first-step sanity report) and --trace DIR (the timeline): the ranks get
// ACCEL_CHECK=1 (as from a config file's sanity_check) and ACCEL_TRACE=DIR, and a plain launch mentions
// neither. Every command runs under `timeout`.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "cli_run.h"

using namespace cli_test;

TEST_CASE("accel launch --check --dry-run exports ACCEL_CHECK=1; sanity_check in the config file does too") {
  Run r = run(fmt::format("{} launch --check --dry-run -n 2 prog", kAccel));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, " -x ACCEL_CHECK=1 "));
  r = run(fmt::format("{} launch --dry-run -n 2 prog", kAccel));
  CHECK(r.status == 0);
  CHECK_FALSE(contains(r.output, "ACCEL_CHECK"));
  const TempDir dir("check");
  const std::string config = dir.write("config.yaml", "num_processes: 2\nsanity_check: true\n");
  r = run(fmt::format("{} launch --config_file {} --dry-run prog", kAccel, config));
  INFO(r.output);
  CHECK(contains(r.output, " -x ACCEL_CHECK=1 "));
  r = run(fmt::format("{} launch --help", kAccel));
  CHECK(contains(r.output, "--check"));
}

TEST_CASE("accel launch --trace DIR --dry-run exports ACCEL_TRACE with DIR made absolute; a plain launch does not") {
  Run r = run(fmt::format("{} launch --trace traces/run1 --dry-run -n 2 prog", kAccel));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, fmt::format(" -x ACCEL_TRACE={}/traces/run1 ", std::filesystem::current_path().string())));
  r = run(fmt::format("{} launch --dry-run -n 2 prog", kAccel));
  CHECK_FALSE(contains(r.output, "ACCEL_TRACE"));
  r = run(fmt::format("{} trace merge /nonexistent/accel-traces out.json", kAccel));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "read_rank_traces: '/nonexistent/accel-traces' is not a directory"));
}
