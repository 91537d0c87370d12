// The text of `accel env`: what a bug report needs about this build and this machine.
#pragma once

#include <string>

namespace accel {

// accel version and build options, compiler, Eigen, OpenMP threads, MPI, CUDA/NCCL when built,
// devices seen, and the config file in use with its contents: config_path (`accel env --config_file`),
// else the default path.
std::string env_report(const std::string& config_path = "");

}  // namespace accel
