// Running the accel executable from the CLI tests: a command under `timeout` with the ACCEL_* settings
// cleared, its status and output, and the line helpers the checks use (TempDir is tests/temp_dir.h's).
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../temp_dir.h"
#include "../text_file.h"

namespace cli_test {

namespace fs = std::filesystem;
using test::lines_of;
using test::TempDir;

struct Run {
  int status = -1;  // the command's exit status (124 when timeout stopped it)
  std::string output;
};

// Runs command ("[NAME=VALUE ...] PROGRAM ARGS", in shell syntax) with the ACCEL_* settings cleared
// (each test sets what it needs in front of the program), bounded by timeout seconds, stdout and
// stderr together.
inline Run run(const std::string& command, int timeout = 60) {
  const std::string line = fmt::format(
      "env -u ACCEL_BACKEND -u ACCEL_MIXED_PRECISION -u ACCEL_GRADIENT_ACCUMULATION_STEPS -u ACCEL_USE_CPU "
      "-u ACCEL_BUCKET_CAP_MB -u ACCEL_MPIRUN_ARGS -u ACCEL_ZERO_STAGE -u ACCEL_FSDP_SHARDING_STRATEGY "
      "ACCEL_CONFIG_FILE=/nonexistent/accel-cli-tests.yaml timeout {} env {} 2>&1",
      timeout, command);
  Run r;
  FILE* pipe = popen(line.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline const std::string kAccel = ACCEL_CLI;

// The lines of text that start with prefix.
inline std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  for (const std::string& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  return found;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The accel path as launch writes it into the mpirun line (resolved through /proc/self/exe).
inline std::string accel_real_path() { return fs::canonical(kAccel).string(); }

inline std::string root_flag() { return geteuid() == 0 ? " --allow-run-as-root" : ""; }

// The OMP_NUM_THREADS export accel launch adds for ranks_per_machine ranks: the value in this
// environment (meson sets one), else the CPUs this process may use divided between the ranks.
inline std::string omp_export(int ranks_per_machine) {
  if (const char* value = std::getenv("OMP_NUM_THREADS")) return fmt::format(" -x OMP_NUM_THREADS={}", value);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  sched_getaffinity(0, sizeof mask, &mask);
  return fmt::format(" -x OMP_NUM_THREADS={}", std::max(1, CPU_COUNT(&mask) / ranks_per_machine));
}

}  // namespace cli_test
