// join_mpi_world: the program-wide MpiEnvironment and a fresh communicator over MPI_COMM_WORLD.
#include "collective/mpi_world.h"

#include "collective/mpi_environment.h"

namespace accel {

std::shared_ptr<MpiCommunicator> join_mpi_world() {
  static MpiEnvironment environment;
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace accel
