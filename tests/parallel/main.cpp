// Entry point of the multi-rank tensor-parallel tests: MPI up for the whole run, test::world() the
// communicator the tests build their tensor-parallel groups from.
#include <mpi.h>

#include <memory>

#include "../mpi_doctest_main.h"
#include "tp_support.h"

int main(int argc, char** argv) {
  return test::run_mpi_doctest(
      argc, argv, "tensor-parallel tests",
      [] { test::world() = std::make_shared<accel::MpiCommunicator>(MPI_COMM_WORLD); },
      [] { test::world().reset(); });
}
