// `accel test`: a short built-in self-check of this build under the current launch settings. Every
// collective on every dtype against exact values (mpi and ring backends), a few data-parallel training
// steps against a one-process run of the same global batch, and gradient accumulation against one
// large batch. It ends in one verdict line that every rank agrees on.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

struct SelfTestResult {
  int checks = 0;                   // checks run on every rank
  std::vector<std::string> failed;  // the checks that failed on at least one rank, in run order
  int ranks = 1;
  int rank = 0;                     // this process's rank (the main process prints the verdict)
  // The Accelerator's backend under these settings: mpi, ring, none (one process), or unknown when
  // no Accelerator could be built.
  std::string backend = "unknown";
  std::string not_checked;          // what this build could not check (e.g. the collectives without MPI)

  bool passed() const { return failed.empty() && checks > 0; }
  // "accel test: PASS (866 checks, 4 ranks, backend mpi)" or
  // "accel test: FAIL (2 of 712 checks: mpi all_reduce avg f16 n=5 in place, train: ...)".
  std::string verdict() const;
};

// Runs every check. Under a launcher this is collective: every rank calls it and gets the same result.
// Each failing check writes "accel test: rank R: CHECK: what differed" to log on the rank where it
// failed. The launch settings come from the ACCEL_* environment and the config file, as for any
// Accelerator; one that cannot be built under them (a bad setting, say) fails the training checks.
SelfTestResult run_self_test(std::ostream& log);

}  // namespace accel
