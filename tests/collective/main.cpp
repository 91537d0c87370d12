// Entry point of the multi-rank collective tests: the mpi and ring communicators under test.
#include <mpi.h>

#include <memory>

#include "../mpi_doctest_main.h"
#include "support.h"

int main(int argc, char** argv) {
  std::shared_ptr<accel::MpiCommunicator> mpi;
  std::shared_ptr<accel::RingCommunicator> ring;
  return test::run_mpi_doctest(
      argc, argv, "collective tests",
      [&] {
        mpi = std::make_shared<accel::MpiCommunicator>(MPI_COMM_WORLD);
        ring = std::make_shared<accel::RingCommunicator>(std::make_shared<accel::MpiCommunicator>(MPI_COMM_WORLD));
        test::backends() = {mpi.get(), ring.get()};
      },
      [&] {
        test::backends().clear();
        ring.reset();
        mpi.reset();
      });
}
