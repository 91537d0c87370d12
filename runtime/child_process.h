// Running a child process and waiting for it, while passing on the signals meant for the job: how
// `accel launch` hands a SIGTERM to mpirun, and each rank's wrapper hands it to the program.
#pragma once

#include <string>
#include <vector>

namespace accel {

// While the child runs, a `received` signal to this process is sent to the child as `sent`.
struct SignalForward {
  int received;
  int sent;
};

// Runs argv and returns its exit status (128 + signal when killed).
int run_command(const std::vector<std::string>& argv, const std::vector<SignalForward>& forwards = {});

}  // namespace accel
