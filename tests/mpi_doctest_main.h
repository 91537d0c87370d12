// The shared entry point of the multi-rank doctest executables: MPI up for the whole run, a watchdog,
// doctest on every rank, and an exit status that is non-zero on every rank when any rank failed.
#pragma once

#include <functional>

namespace test {

// Runs the doctest cases of this executable on every rank. setup runs once MPI is up, before the
// cases; teardown after them. `what` names the tests in the last line rank 0 prints. The watchdog
// aborts the job after ACCEL_TEST_WATCHDOG_S seconds (100 by default, below meson's 120 s timeout),
// so that a hang (ranks that disagree on the order of collectives, say) fails within the budget.
int run_mpi_doctest(int argc, char** argv, const char* what, const std::function<void()>& setup = {},
                    const std::function<void()>& teardown = {});

}  // namespace test
