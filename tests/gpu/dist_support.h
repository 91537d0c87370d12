// What the multi-rank GPU tests (test_gpu_dist, under mpirun) share: the world communicator (the mpi
// backend over MPI_COMM_WORLD) that main() creates.
#pragma once

#include "collective/communicator.h"

namespace accel::gpu_test {

Communicator& world();

}  // namespace accel::gpu_test
