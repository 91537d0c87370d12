// accel launch: turns the resolved settings into an Open MPI mpirun command line and runs it.
// mpirun stays the engine that knows hosts, SLURM and networks; accel only writes its arguments.
#pragma once

#include <string>
#include <vector>

#include "runtime/config_file.h"

namespace accel {

struct LaunchRequest {
  ConfigFile config;               // config file values overridden by the command's flags
  std::string program;
  std::vector<std::string> program_args;
  std::string self_path;           // this accel executable, which wraps each rank to report its exit
};

struct HostFacts {
  int cores = 1;
  bool is_root = false;
};

// The full mpirun argv: -np, --oversubscribe when there are more ranks per machine than cores,
// --allow-run-as-root when root, the hostfile, the ACCEL_* settings exported with -x, and each
// rank wrapped as `accel exec-rank -- PROGRAM ARGS`.
std::vector<std::string> mpirun_command(const LaunchRequest& request, const HostFacts& host);
// The ACCEL_* variables that carry the settings to every rank.
std::vector<std::pair<std::string, std::string>> settings_environment(const ConfigFile& config);
// A shell-quoted line of argv, for --dry-run.
std::string shell_join(const std::vector<std::string>& argv);

// Runs argv and returns its exit status (128 + signal when killed).
int run_command(const std::vector<std::string>& argv);
// What `accel exec-rank` does inside each rank: runs the program, and when it fails prints
// "accel launch: rank R on HOST exited with status S" so the failing rank is named.
int exec_rank(const std::vector<std::string>& argv);

}  // namespace accel
