// ProcessState: this process's place in the job (rank, local rank, world size, node), read from the
// environment that the launcher set: Open MPI, MPICH/PMI, SLURM or torchrun-style variables.
#pragma once

#include <map>
#include <string>

namespace accel {

using EnvironmentVariables = std::map<std::string, std::string>;

// This process's environment variables, read once per call.
EnvironmentVariables environment_variables();
// This machine's name as the messages that name a rank give it ("localhost" when it has none).
std::string host_name();

struct ProcessState {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this node
  int local_world_size = 1;  // processes on this node
  int node_rank = 0;
  int num_nodes = 1;
  // Which variables it came from: "openmpi", "pmi", "slurm", "torchrun", or "none" (started plainly).
  std::string launcher = "none";

  bool is_main_process() const { return rank == 0; }
  bool is_local_main_process() const { return local_rank == 0; }

  // Reads the first launcher whose variables are present, in the order Open MPI, PMI, SLURM,
  // torchrun (mpirun inside a SLURM allocation sets both; its own variables are the precise ones).
  // Throws accel::Error naming the variable when a value is malformed or inconsistent.
  static ProcessState from_environment(const std::map<std::string, std::string>& env);
  static ProcessState from_environment();  // this process's environment
};

}  // namespace accel
