// The text of `accel env`: what a bug report needs about this build and this machine.
#pragma once

#include <string>

namespace accel {

// accel version and build options, compiler, Eigen, OpenMP threads, MPI, CUDA/NCCL when built,
// devices seen, and the config file in use with its contents.
std::string env_report();

}  // namespace accel
