// Launcher environment parsing. Every launcher names rank and size; the node is derived when the
// launcher does not say it, assuming the same number of processes on every node.
#include "runtime/process_state.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "kernels/error.h"

extern char** environ;

namespace accel {

namespace {

using Env = std::map<std::string, std::string>;

std::optional<int> read_int(const Env& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  size_t used = 0;
  long value = -1;
  try {
    value = std::stol(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || value < 0 || value > 1'000'000'000)
    throw Error(fmt::format("ProcessState: {}='{}' is not a non-negative integer", name, it->second));
  return static_cast<int>(value);
}

struct Names {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* node_rank;
  const char* num_nodes;
};

// Variable names per launcher; "" where the launcher has none.
constexpr Names kLaunchers[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "", ""},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "", ""},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
     "SLURM_NNODES"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", ""},
};

}  // namespace

ProcessState ProcessState::from_environment(const Env& env) {
  for (const Names& names : kLaunchers) {
    const auto rank = read_int(env, names.rank);
    const auto size = read_int(env, names.size);
    if (!rank || !size) continue;
    ProcessState s;
    s.launcher = names.launcher;
    s.rank = *rank;
    s.world_size = *size;
    if (s.world_size == 0 || s.rank >= s.world_size)
      throw Error(fmt::format("ProcessState: {}={} is not a rank in a world of {}={}", names.rank, s.rank, names.size,
                              s.world_size));
    s.local_rank = read_int(env, names.local_rank).value_or(s.rank);
    // SLURM_NTASKS_PER_NODE can be "2(x3)"; only a plain count is used, else derive from the nodes.
    std::optional<int> local_size;
    try {
      local_size = read_int(env, names.local_size);
    } catch (const Error&) {
      if (std::string(names.launcher) != "slurm") throw;
    }
    const auto nodes = names.num_nodes[0] ? read_int(env, names.num_nodes) : std::nullopt;
    s.local_world_size = local_size.value_or(nodes ? (s.world_size + *nodes - 1) / *nodes : s.world_size);
    if (s.local_world_size == 0 || s.local_rank >= s.local_world_size)
      throw Error(fmt::format("ProcessState: local rank {} ({}) is not below the {} processes on this node", s.local_rank,
                              names.local_rank, s.local_world_size));
    s.num_nodes = nodes.value_or((s.world_size + s.local_world_size - 1) / s.local_world_size);
    const auto node = names.node_rank[0] ? read_int(env, names.node_rank) : std::nullopt;
    s.node_rank = node.value_or((s.rank - s.local_rank) / s.local_world_size);
    return s;
  }
  return ProcessState{};
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

EnvironmentVariables environment_variables() {
  EnvironmentVariables env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

ProcessState ProcessState::from_environment() { return from_environment(environment_variables()); }

}  // namespace accel
