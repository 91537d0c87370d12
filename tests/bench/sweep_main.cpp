// Entry point of the multi-rank sweep tests of `accel bench` (mpirun's --timeout in
// tests/bench/lib/meson.build also ends the job if it hangs).
#include "../mpi_doctest_main.h"

int main(int argc, char** argv) { return test::run_mpi_doctest(argc, argv, "bench sweep tests"); }
