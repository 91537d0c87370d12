// Running a child process and waiting for it, while passing on the signals meant for the job: how
// `accel launch` hands a SIGTERM to mpirun, and each rank's wrapper hands it to the program.
#pragma once

#include <string>
#include <vector>

namespace accel {

// While the child runs, a `received` signal to this process is sent to the child as `sent`, and
// with to_grandchildren to the child's own children too, from here: mpirun passes a signal on late
// now and then (Open MPI 4.1: after 14 s, or not before the job ends), so `accel launch` reaches the
// ranks' wrappers on its machine itself.
struct SignalForward {
  int received;
  int sent;
  bool to_grandchildren = false;
};

// Runs argv and returns its exit status (128 + signal when killed).
int run_command(const std::vector<std::string>& argv, const std::vector<SignalForward>& forwards = {});

}  // namespace accel
