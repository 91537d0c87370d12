// accel launch --check (the first-step sanity report): the ranks get ACCEL_CHECK=1, as they do from a
// config file's sanity_check, and a plain launch does not mention it. Every command runs under `timeout`.
#include <doctest/doctest.h>
#include <fmt/format.h>

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
