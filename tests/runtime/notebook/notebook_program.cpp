// A program started plainly that runs functions on several ranks through notebook_launcher; each
// scenario checks what the caller sees afterwards and exits non-zero when a check fails.
// Usage: notebook_program ok|fail|twice|in_process|bad_input OUT_DIR (OUT_DIR empty and existing).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "accel.h"

namespace fs = std::filesystem;
namespace {

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok:   " : "FAIL: ") << what << "\n";
  if (!ok) ++g_failures;
}

// Appends one line to a file, so that the caller can count how often a piece of code ran.
void append(const fs::path& file, const std::string& line) { std::ofstream(file, std::ios::app) << line << "\n"; }

int count_lines(const fs::path& file) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  std::getline(in, text);
  return text;
}

// On every rank: joins the others through an Accelerator and writes "rank world sum-of-ranks".
void sum_ranks(const fs::path& out, const std::string& tag) {
  accel::AcceleratorOptions options;
  options.print_settings = false;
  accel::Accelerator accelerator(options);
  const accel::Tensor mine = accel::full({1}, accelerator.process_index());
  const double sum = accelerator.reduce(mine, accel::ReduceOp::sum).item();
  append(out / fmt::format("{}_rank{}.txt", tag, accelerator.process_index()),
         fmt::format("{} {} {}", accelerator.process_index(), accelerator.num_processes(), sum));
}

void scenario_ok(const fs::path& out) {
  accel::notebook_launcher([&] { sum_ranks(out, "ok"); }, 2);
  append(out / "after.txt", std::to_string(getpid()));
  check(read(out / "ok_rank0.txt") == "0 2 1" && read(out / "ok_rank1.txt") == "1 2 1",
        "both ranks ran fn on a world of 2 and all-reduced their ranks: '" + read(out / "ok_rank0.txt") + "', '" +
            read(out / "ok_rank1.txt") + "'");
  check(count_lines(out / "ok_rank0.txt") == 1 && count_lines(out / "ok_rank1.txt") == 1, "each rank ran fn once");
  check(count_lines(out / "after.txt") == 1, "the code after the call ran only in the caller");
}

void scenario_fail(const fs::path& out) {
  const auto start = std::chrono::steady_clock::now();
  try {
    accel::notebook_launcher(
        [&] {
          accel::AcceleratorOptions options;
          options.print_settings = false;
          accel::Accelerator accelerator(options);
          if (accelerator.process_index() == 1) throw accel::Error("rank one gives up before the reduce");
          // Rank 0 waits here for a rank that will never come: the job must still end.
          accelerator.reduce(accel::full({1}, 1.0), accel::ReduceOp::sum);
          append(out / "rank0_passed_the_reduce.txt", "unexpected");
        },
        2);
    check(false, "notebook_launcher rethrows the failing rank's error");
  } catch (const accel::RankFailure& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "caught: " << e.what() << fmt::format(" (after {:.1f} s)\n", seconds);
    check(e.rank() == 1, fmt::format("the failure names rank 1 (got {})", e.rank()));
    check(std::string(e.what()).find("rank one gives up before the reduce") != std::string::npos,
          "the failure carries the rank's message");
    check(seconds < 30, fmt::format("the job ended within 30 s of the failure ({:.1f} s)", seconds));
  }
  check(!fs::exists(out / "rank0_passed_the_reduce.txt"), "rank 0 never got past the reduce");
}

void scenario_twice(const fs::path& out) {
  accel::notebook_launcher([&] { sum_ranks(out, "first"); }, 2);
  accel::debug_launcher([&] {
    sum_ranks(out, "second");
    accel::AcceleratorOptions options;
    options.print_settings = false;
    append(out / "second_device.txt", accel::Accelerator(options).device().str());
  });
  check(count_lines(out / "first_rank0.txt") == 1 && count_lines(out / "first_rank1.txt") == 1,
        "the ranks of the second launch skipped the first call");
  check(read(out / "second_rank1.txt") == "1 2 1", "the second launch ran its own function on 2 ranks");
  check(read(out / "second_device.txt") == "cpu", "debug_launcher runs on the CPU");
}

void scenario_in_process(const fs::path& out) {
  const pid_t caller = getpid();
  pid_t ran_in = 0;
  accel::notebook_launcher([&] { ran_in = getpid(); }, 1);
  check(ran_in == caller, "num_processes 1 runs fn in the caller's process");
  (void)out;
}

template <class F>
void expect_error(F&& f, const std::string& needle, const std::string& what) {
  try {
    f();
    check(false, what + ": no error");
  } catch (const accel::Error& e) {
    check(std::string(e.what()).find(needle) != std::string::npos, what + ": " + e.what());
  }
}

void scenario_bad_input(const fs::path&) {
  expect_error([] { accel::notebook_launcher([] {}, 0); }, "num_processes is 0, expected at least 1",
               "zero processes");
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  expect_error([] { accel::notebook_launcher([] {}, 2); }, "already runs as rank 0 of 2", "inside a launched job");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: notebook_program ok|fail|twice|in_process|bad_input OUT_DIR\n";
    return 2;
  }
  const std::string scenario = argv[1];
  const fs::path out = argv[2];
  try {
    if (scenario == "ok") scenario_ok(out);
    else if (scenario == "fail") scenario_fail(out);
    else if (scenario == "twice") scenario_twice(out);
    else if (scenario == "in_process") scenario_in_process(out);
    else if (scenario == "bad_input") scenario_bad_input(out);
    else throw accel::Error("notebook_program: unknown scenario " + scenario);
  } catch (const std::exception& e) {
    std::cout << "FAIL: " << e.what() << "\n";
    return 1;
  }
  return g_failures == 0 ? 0 : 1;
}
