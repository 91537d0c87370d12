// The program's MPI and a communicator over all of its processes: what a runtime needs to join the
// other ranks without making MPI calls itself.
#pragma once

#include <memory>

#include "collective/mpi_communicator.h"

namespace accel {

// Starts MPI for the whole program on first use (asking for MPI_THREAD_MULTIPLE) and finalises it at
// exit: MPI cannot start twice in one process, so it must outlive any one user of it. If the program
// started MPI itself, this only looks on. Then returns a new communicator over MPI_COMM_WORLD, with
// traffic of its own. Collective over every process.
std::shared_ptr<MpiCommunicator> join_mpi_world();

}  // namespace accel
