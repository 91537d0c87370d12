// Entry point of the multi-rank data-parallel tests: MPI up for the whole run (so every test can build
// Accelerators in turn), a watchdog, doctest on every rank, and an exit status that is non-zero on
// every rank when any rank failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "support.h"

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

double watchdog_seconds() {
  const char* text = std::getenv("ACCEL_TEST_WATCHDOG_S");
  return text != nullptr ? std::atof(text) : 100.0;  // below meson's 120 s timeout
}

}  // namespace

int main(int argc, char** argv) {
  accel::MpiEnvironment environment(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int failed = 1;
  Watchdog watchdog(rank, watchdog_seconds());
  try {
    test::world() = std::make_shared<accel::MpiCommunicator>(MPI_COMM_WORLD);
    doctest::Context context(argc, argv);
    if (rank != 0) context.setOption("minimal", true);  // the other ranks print their failures only
    failed = context.run() != 0 ? 1 : 0;
    test::world().reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }

  int ranks_failed = 0;
  MPI_Allreduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (ranks_failed == 0) std::printf("data-parallel tests passed on all %d ranks\n", size);
    else std::printf("data-parallel tests FAILED on %d of %d ranks\n", ranks_failed, size);
  }
  return ranks_failed == 0 ? 0 : 1;
}
