// notebook_launcher and debug_launcher: run a function on several ranks from a program that was
// started plainly, as Accelerate's do from a notebook. The program is started again under
// `accel launch`, and in each copy the same call runs the function instead (multiprocessing's spawn).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace accel {

struct NotebookLaunchOptions {
  std::string mixed_precision = "no";    // --mixed_precision of the launch
  bool use_cpu = false;                  // --cpu
  std::vector<std::string> launch_args;  // more `accel launch` flags, e.g. {"--backend", "ring"}
};

// The error a rank raised inside fn, rethrown in the caller.
class RankFailure : public Error {
 public:
  RankFailure(int rank, const std::string& message) : Error(message), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

// Runs fn on num_processes ranks and returns when all of them have ended. The caller's process
// starts `accel launch -n num_processes` on this same program with its arguments; in each rank the
// program runs from main again until it reaches this call, runs fn (which builds its Accelerator as
// usual), and ends there. So code before the call runs in every rank too, and code after it only
// in the caller. Earlier notebook_launcher calls are skipped in the ranks, as already done.
// If a rank's fn throws, the job is ended and the first failure is rethrown here as a RankFailure
// naming that rank. num_processes 1 runs fn here. Throws accel::Error when called inside a launched
// job, or after MPI has started in this process (the ranks must be fresh processes, not forks).
// Finds the accel executable as $ACCEL_EXECUTABLE, the build tree's, the installed one, then PATH.
void notebook_launcher(const std::function<void()>& fn, int num_processes, const NotebookLaunchOptions& options = {});

// notebook_launcher on num_processes CPU ranks, for testing distributed code on a laptop.
void debug_launcher(const std::function<void()>& fn, int num_processes = 2);

}  // namespace accel
