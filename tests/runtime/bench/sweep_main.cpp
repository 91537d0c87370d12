// Entry point of the multi-rank sweep tests: MPI up, doctest on every rank, and an exit status that
// is non-zero on every rank when any rank failed. mpirun's --timeout (tests/runtime/bench/meson.build)
// ends the job if it hangs.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>

#include "collective/mpi_environment.h"

int main(int argc, char** argv) {
  accel::MpiEnvironment environment(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failed = 1;
  try {
    doctest::Context context(argc, argv);
    if (rank != 0) context.setOption("minimal", true);  // the other ranks print their failures only
    failed = context.run() != 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }
  int ranks_failed = 0;
  MPI_Allreduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (ranks_failed == 0) std::printf("bench sweep tests passed on all %d ranks\n", size);
    else std::printf("bench sweep tests FAILED on %d of %d ranks\n", ranks_failed, size);
  }
  return ranks_failed == 0 ? 0 : 1;
}
