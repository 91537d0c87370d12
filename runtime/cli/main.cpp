// The accel executable: config, launch, env, test, bench, estimate-memory, merge-weights, trace (and
// the hidden exec-rank that wraps each launched rank).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "kernels/error.h"
#include "runtime/cli/bench_command.h"
#include "runtime/cli/command_suggestion.h"
#include "runtime/cli/config_command.h"
#include "runtime/cli/env_report.h"
#include "runtime/cli/estimate_memory_command.h"
#include "runtime/cli/launch.h"
#include "runtime/cli/launch_command.h"
#include "runtime/cli/self_test.h"
#include "runtime/cli/merge_weights_command.h"
#include "runtime/cli/trace_command.h"
#include "runtime/config_file.h"

namespace {

std::string self_path(const char* argv0) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : exe.string();
}

// What `accel launch` divides between its local ranks: online CPUs (mpirun's slots) and the CPUs this
// process may run on (its affinity mask, which the ranks inherit; a cpuset or taskset narrows it).
accel::HostFacts host_facts() {
  accel::HostFacts host{static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), geteuid() == 0};
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) host.usable_cpus = CPU_COUNT(&mask);
  return host;
}

// A mistyped subcommand (the first word, and the word after `config`) is named with the nearest one.
void check_command_words(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  accel::check_command_name("accel", argv[1], {"config", "launch", "env", "test", "bench", "estimate-memory", "merge-weights", "trace"});
  if (std::string(argv[1]) == "config" && argc >= 3 && argv[2][0] != '-') {
    // `accel config --config_file X default`: the word after an option's value is not checked here.
    accel::check_command_name("accel config", argv[2], {"default", "update"});
  }
}

// `accel env` and `accel test` take --config_file for the file the Accelerator reads.
void use_config_file(const std::string& command, const std::string& path) {
  if (path.empty()) return;
  if (!std::filesystem::exists(path))
    throw accel::Error(fmt::format("accel {}: --config_file {}: no such file", command, path));
  setenv("ACCEL_CONFIG_FILE", path.c_str(), 1);
}

int run(int argc, char** argv) {
  CLI::App app{"accel: run one training program on one CPU, many MPI ranks or GPUs, in fp32, fp16, bf16 or fp8"};
  app.require_subcommand(1);

  accel::ConfigCommand config(app);  // accel config [default|update]
  accel::LaunchCommand launch(app);  // accel launch ...

  std::string env_config, test_config;
  auto* env = app.add_subcommand("env", "Print what a bug report needs: versions, build options, devices, config");
  env->add_option("--config_file", env_config, "Report this config file instead of the default one");
  // accel test (alone, or under `accel launch -n N accel test`)
  auto* self_test = app.add_subcommand(
      "test", "Check the collectives and data-parallel training under the current launch settings; ends with "
              "one verdict line and exits non-zero on FAIL");
  self_test->add_option("--config_file", test_config, "Config file the Accelerator reads (default: the usual one)");

  accel::BenchCommand bench(app);  // accel bench allreduce|allgather|reducescatter|broadcast
  accel::EstimateMemoryCommand estimate_memory(app);
  accel::TraceCommand trace(app);  // accel trace merge DIR OUT.json
  accel::MergeWeightsCommand merge_weights(app);  // accel merge-weights CHECKPOINT OUT_DIR

  // accel exec-rank -- PROGRAM ARGS is internal: it wraps one launched rank to name it when it
  // fails. Its arguments are the program's, so they bypass the parser.
  if (argc >= 2 && std::string(argv[1]) == "exec-rank") {
    std::vector<std::string> rank_command(argv + 2, argv + argc);
    if (!rank_command.empty() && rank_command.front() == "--") rank_command.erase(rank_command.begin());
    if (rank_command.empty()) throw accel::Error("accel exec-rank: no program given");
    return accel::exec_rank(rank_command);
  }
  check_command_words(argc, argv);
  // `accel launch [options] -- PROGRAM ARGS`: what follows -- is the program's, unparsed.
  std::vector<std::string> after_separator;
  if (argc >= 2 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        after_separator.assign(argv + i + 1, argv + argc);
        argc = i;
        break;
      }
    }
  }

  CLI11_PARSE(app, argc, argv);

  if (bench.selected()) return bench.run();
  if (estimate_memory.selected()) return estimate_memory.run(std::cout);
  if (trace.selected()) return trace.run(std::cout);
  if (merge_weights.selected()) return merge_weights.run(std::cout);
  if (config.selected()) return config.run(std::cin, std::cout);
  if (*env) {
    std::cout << accel::env_report(env_config);
    return 0;
  }
  if (*self_test) {
    use_config_file("test", test_config);
    const accel::SelfTestResult result = accel::run_self_test(std::cerr);
    if (result.rank == 0) std::cout << result.verdict() << std::endl;
    return result.passed() ? 0 : 1;
  }

  // launch: config file first, then the flags given on the command line.
  const accel::LaunchRequest request = launch.request(after_separator, self_path(argv[0]));
  return accel::launch(request, host_facts(), launch.dry_run(), std::cout, std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const accel::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
