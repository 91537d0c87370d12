// Building and running the mpirun command line.
#include "runtime/launch.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include "runtime/process_state.h"
#include "tensor/error.h"

namespace accel {

std::vector<std::pair<std::string, std::string>> settings_environment(const ConfigFile& c) {
  return {{"ACCEL_MIXED_PRECISION", c.mixed_precision},
          {"ACCEL_GRADIENT_ACCUMULATION_STEPS", std::to_string(c.gradient_accumulation_steps)},
          {"ACCEL_USE_CPU", c.use_cpu ? "true" : "false"},
          {"ACCEL_BACKEND", c.backend}};
}

std::vector<std::string> mpirun_command(const LaunchRequest& request, const HostFacts& host) {
  const ConfigFile& c = request.config;
  validate_config(c, "accel launch");
  if (request.program.empty()) throw Error("accel launch: no program given; usage: accel launch [options] PROGRAM [ARGS...]");
  if (c.num_machines > 1 && c.hostfile.empty() && c.environment != "slurm")
    throw Error(fmt::format("accel launch: {} machines need --hostfile (mpirun starts the remote ranks over ssh) or a "
                            "SLURM allocation",
                            c.num_machines));
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(c.num_processes)};
  const int per_machine = (c.num_processes + c.num_machines - 1) / c.num_machines;
  if (per_machine > host.cores) argv.push_back("--oversubscribe");
  if (host.is_root) argv.push_back("--allow-run-as-root");
  if (!c.hostfile.empty()) {
    argv.push_back("--hostfile");
    argv.push_back(c.hostfile);
  }
  for (const auto& [name, value] : settings_environment(c)) {
    argv.push_back("-x");
    argv.push_back(name + "=" + value);
  }
  argv.push_back(request.self_path.empty() ? "accel" : request.self_path);
  argv.push_back("exec-rank");
  argv.push_back("--");
  argv.push_back(request.program);
  argv.insert(argv.end(), request.program_args.begin(), request.program_args.end());
  return argv;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      line += arg;
    } else {
      line += '\'';
      for (char ch : arg) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      line += '\'';
    }
  }
  return line;
}

int run_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("run_command: empty command");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("run_command: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    execvp(args[0], args.data());
    std::cerr << fmt::format("accel: cannot run '{}': {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("run_command: waitpid failed: {}", std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int exec_rank(const std::vector<std::string>& argv) {
  const int status = run_command(argv);
  if (status != 0) {
    const ProcessState state = ProcessState::from_environment();
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    std::cerr << fmt::format("accel launch: rank {} on {} exited with status {}{}\n", state.rank, host, status,
                             status > 128 ? fmt::format(" (signal {})", status - 128) : "");
  }
  return status;
}

}  // namespace accel
