// Entry point of the multi-rank ZeRO / FSDP tests: MPI stays up for the whole run, so every test can
// build Accelerators in turn; test::world() is the communicator the tests compare ranks with.
#include <mpi.h>

#include <memory>

#include "../mpi_doctest_main.h"
#include "../ddp/support.h"

int main(int argc, char** argv) {
  return test::run_mpi_doctest(
      argc, argv, "ZeRO tests",
      [] { test::world() = std::make_shared<accel::MpiCommunicator>(MPI_COMM_WORLD); },
      [] { test::world().reset(); });
}
