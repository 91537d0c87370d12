// Watchdog: a thread per rank that notices a collective which has not finished within the timeout,
// or one that a departed rank will never join, gathers every rank's state through the run directory
// (not through the stuck communicator), prints one report of who waits where, and ends the job.
// It also names the rank on an uncaught exception or a fatal signal (see install_failure_naming).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace accel {

// The exit status of a rank that ends the job after a stall report (timeout(1)'s).
inline constexpr int kStalledExitStatus = 124;

// The directory the ranks of a job share for reports: $ACCEL_RUN_DIR (`accel launch` makes one per
// job), or nullopt when it is unset.
std::optional<std::string> run_directory();

struct WatchdogOptions {
  int rank = 0;
  int world_size = 1;
  double timeout_s = 600;
  std::optional<std::string> run_dir;
  double poll_s = 0.2;
  // How long a rank may wait in a collective that a departed rank never entered before the report.
  double departed_grace_s = 1.0;
  // How long the reporting rank waits for the others' states.
  double roll_call_s = 5.0;
};

class Watchdog {
 public:
  explicit Watchdog(WatchdogOptions options);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void loop();
  void check_once();
  void answer_roll_call_if_asked();
  // Reports the stall of the collective and ends the job (if this rank reports), else answers.
  void stalled(const std::string& comm, double waited_s, uint64_t seq, const std::string& why);
  [[noreturn]] void report_and_end(const std::string& comm, uint64_t seq, double waited_s, const std::string& why);
  // The seq past which the departed ranks never went on comm, if some rank departed before it.
  bool departed_before(const std::string& comm, uint64_t seq) const;

  WatchdogOptions options_;
  bool answered_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// Once per process: an uncaught exception or a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL) is
// printed as "accel: rank R (host, pid P) failed: ..." before the process dies as it would have, and
// the first failure of the job is written to run_dir/failure.txt for `accel launch` to repeat last.
// At exit the rank writes its state to the run directory as "exiting", so that ranks waiting for it
// report at once instead of after the timeout.
void install_failure_naming(int rank, const std::optional<std::string>& run_dir);

}  // namespace accel
