// The accel executable: config, launch, env, test, bench (and the hidden exec-rank that wraps each launched rank).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "kernels/error.h"
#include "runtime/cli/bench_command.h"
#include "runtime/cli/config_wizard.h"
#include "runtime/cli/env_report.h"
#include "runtime/cli/launch.h"
#include "runtime/cli/launch_command.h"
#include "runtime/cli/self_test.h"
#include "runtime/config_file.h"

namespace {

std::string self_path(const char* argv0) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : exe.string();
}

int run(int argc, char** argv) {
  CLI::App app{"accel: run one training program on one CPU, many MPI ranks or GPUs, in fp32, fp16 or bf16"};
  app.require_subcommand(1);

  // accel config [default]
  auto* config = app.add_subcommand("config", "Ask the launch questions once and write the config file");
  std::string config_path;
  config->add_option("--config_file", config_path, "Where to write (default: " + accel::default_config_path() + ")");
  auto* config_default = config->add_subcommand("default", "Write a config with default answers, without questions");

  // accel launch ...
  accel::LaunchCommand launch(app);

  // accel env
  auto* env = app.add_subcommand("env", "Print what a bug report needs: versions, build options, devices, config");

  // accel test (alone, or under `accel launch -n N accel test`)
  auto* self_test = app.add_subcommand(
      "test", "Check the collectives and data-parallel training under the current launch settings; ends with "
              "one verdict line and exits non-zero on FAIL");

  // accel bench allreduce|allgather|reducescatter|broadcast
  accel::BenchCommand bench(app);

  // accel exec-rank -- PROGRAM ARGS is internal: it wraps one launched rank to name it when it
  // fails. Its arguments are the program's, so they bypass the parser.
  if (argc >= 2 && std::string(argv[1]) == "exec-rank") {
    std::vector<std::string> rank_command(argv + 2, argv + argc);
    if (!rank_command.empty() && rank_command.front() == "--") rank_command.erase(rank_command.begin());
    if (rank_command.empty()) throw accel::Error("accel exec-rank: no program given");
    return accel::exec_rank(rank_command);
  }
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

  if (*config) {
    const std::string path = config_path.empty() ? accel::default_config_path() : config_path;
    const accel::ConfigFile answers = *config_default ? accel::default_answers() : accel::ask_config(std::cin, std::cout);
    accel::save_config(answers, path);
    std::cout << fmt::format("accel config: wrote {}\n", path);
    return 0;
  }
  if (*env) {
    std::cout << accel::env_report();
    return 0;
  }
  if (*self_test) {
    const accel::SelfTestResult result = accel::run_self_test(std::cerr);
    if (result.rank == 0) std::cout << result.verdict() << std::endl;
    return result.passed() ? 0 : 1;
  }

  // launch: config file first, then the flags given on the command line.
  const accel::LaunchRequest request = launch.request(after_separator, self_path(argv[0]));
  const accel::HostFacts host{static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), geteuid() == 0};
  return accel::launch(request, host, launch.dry_run(), std::cout, std::cerr);
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
