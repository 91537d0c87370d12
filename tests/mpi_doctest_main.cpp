// The multi-rank doctest entry point shared by tests/collective, tests/ddp, tests/amp and the bench sweep.
#define DOCTEST_CONFIG_IMPLEMENT
#include "mpi_doctest_main.h"

#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "collective/mpi_environment.h"

namespace {

// Aborts the whole job when the tests run longer than they may, so that a hang (ranks that disagree
// on the order of collectives, say) fails within the test's budget instead of holding CI.
class Watchdog {
 public:
  Watchdog(int rank, double seconds)
      : thread_([this, rank, seconds] {
          std::unique_lock lock(mutex_);
          if (stop_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done_; })) return;
          std::fprintf(stderr, "rank %d: watchdog: the tests are still running after %.0f s; aborting the job\n",
                       rank, seconds);
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 3);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    stop_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable stop_;
  bool done_ = false;
  std::thread thread_;
};

// ACCEL_TEST_WATCHDOG_SCALE stretches it by the factor by which a sanitized build's runner stretches
// meson's timeouts (tests/sanitize/run_sanitized_suite.sh), so that it stays below them.
double watchdog_seconds() {
  const char* text = std::getenv("ACCEL_TEST_WATCHDOG_S");
  const char* scale = std::getenv("ACCEL_TEST_WATCHDOG_SCALE");
  return (text != nullptr ? std::atof(text) : 100.0) * (scale != nullptr ? std::atof(scale) : 1.0);
}

}  // namespace

namespace test {

int run_mpi_doctest(int argc, char** argv, const char* what, const std::function<void()>& setup,
                    const std::function<void()>& teardown) {
  accel::MpiEnvironment environment(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int failed = 1;
  Watchdog watchdog(rank, watchdog_seconds());
  try {
    if (setup) setup();
    doctest::Context context(argc, argv);
    if (rank != 0) context.setOption("minimal", true);  // the other ranks print their failures only
    failed = context.run() != 0 ? 1 : 0;
    if (teardown) teardown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }

  int ranks_failed = 0;
  MPI_Allreduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (ranks_failed == 0) std::printf("%s passed on all %d ranks\n", what, size);
    else std::printf("%s FAILED on %d of %d ranks\n", what, ranks_failed, size);
  }
  return ranks_failed == 0 ? 0 : 1;
}

}  // namespace test
