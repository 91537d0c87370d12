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
  auto* launch = app.add_subcommand("launch", "Start PROGRAM on every rank through mpirun");
  std::string launch_config_path;
  int num_processes = 0, num_machines = 0, machine_rank = -1, port = 0, accumulation = 0;
  std::string hostfile, main_ip, precision;
  bool cpu = false, dry_run = false;
  launch->add_option("--config_file", launch_config_path, "Config file (default: the one `accel config` wrote)");
  launch->add_option("-n,--num_processes", num_processes, "Processes in total")->check(CLI::PositiveNumber);
  launch->add_option("--num_machines", num_machines, "Machines")->check(CLI::PositiveNumber);
  launch->add_option("--machine_rank", machine_rank, "This machine's index")->check(CLI::NonNegativeNumber);
  launch->add_option("--main_process_ip", main_ip, "Address of machine 0");
  launch->add_option("--main_process_port", port, "Port on machine 0")->check(CLI::Range(1, 65535));
  launch->add_option("--hostfile", hostfile, "Open MPI hostfile");
  std::string mpirun_args;
  double rendezvous_timeout = 300;
  launch->add_option("--mpirun_args,--mpirun-args", mpirun_args,
                     "Extra mpirun options, one string split like a shell line (e.g. \"--mca btl tcp,self\")")
      ->envname("ACCEL_MPIRUN_ARGS");
  launch->add_option("--rendezvous_timeout", rendezvous_timeout,
                     "Seconds machine 0 waits for the other machines, and they for it (machine flags)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  launch->add_option("--mixed_precision", precision, accel::available_choices(accel::kMixedPrecisionNames))
      ->check(CLI::IsMember(accel::available_names(accel::kMixedPrecisionNames)));
  launch->add_flag("--cpu", cpu, "Train on the CPU even when GPUs are present");
  launch->add_option("--gradient_accumulation_steps", accumulation, "Micro-batches per optimizer step")
      ->check(CLI::PositiveNumber);
  launch->add_flag("--dry-run,--dry_run", dry_run, "Print the mpirun command line instead of running it");
  // Everything from PROGRAM on belongs to the program, flags included.
  launch->prefix_command();
  launch->footer("PROGRAM [ARGS...] follow the options; everything from PROGRAM on is passed to it unchanged.");

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
  accel::LaunchRequest request;
  const std::string path = launch_config_path.empty() ? accel::default_config_path() : launch_config_path;
  if (!launch_config_path.empty() || std::filesystem::exists(path)) request.config = accel::load_config(path);
  accel::ConfigFile& c = request.config;
  if (num_processes) c.num_processes = num_processes;
  if (num_machines) c.num_machines = num_machines;
  if (machine_rank >= 0) c.machine_rank = machine_rank;
  if (!main_ip.empty()) c.main_process_ip = main_ip;
  if (port) c.main_process_port = port;
  if (!hostfile.empty()) c.hostfile = hostfile;
  if (!precision.empty()) c.mixed_precision = *accel::value_in(accel::kMixedPrecisionNames, precision);
  if (cpu) c.use_cpu = true;
  if (accumulation) c.gradient_accumulation_steps = accumulation;
  if (c.num_machines > 1 && c.environment == "local") c.environment = "hosts";
  std::vector<std::string> command = launch->remaining();
  command.insert(command.end(), after_separator.begin(), after_separator.end());
  if (command.empty()) throw accel::Error("accel launch: no program given; usage: accel launch [options] PROGRAM [ARGS...]");
  if (command.front().size() > 1 && command.front()[0] == '-')
    throw accel::Error(fmt::format("accel launch: unknown option '{}' (see accel launch --help)", command.front()));
  request.program = command.front();
  request.program_args.assign(command.begin() + 1, command.end());
  request.self_path = self_path(argv[0]);
  const accel::HostFacts host{static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), geteuid() == 0};
  request.mpirun_args = accel::split_arguments(mpirun_args, "--mpirun_args");
  request.rendezvous_timeout_s = rendezvous_timeout;
  return accel::launch(request, host, dry_run, std::cout, std::cerr);
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
