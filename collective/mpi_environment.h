// MpiEnvironment: the RAII owner of MPI's lifetime. It initialises MPI (asking for
// MPI_THREAD_MULTIPLE) only if nobody has yet, and finalises only what it initialised, so a program
// that manages MPI itself can embed accel unchanged. The runtime's Accelerator is to own one.
#pragma once

#include <string>

namespace accel {

class MpiEnvironment {
 public:
  // argc/argv are handed to MPI_Init_thread when this object initialises MPI.
  MpiEnvironment();
  MpiEnvironment(int& argc, char**& argv);
  // Calls MPI_Finalize if this object initialised MPI and it is not finalised yet. Every communicator
  // must be destroyed before then.
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  bool initialised_here() const { return initialised_here_; }
  // What MPI provides: MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE.
  int thread_level() const { return thread_level_; }

 private:
  void init(int* argc, char*** argv);
  bool initialised_here_ = false;
  int thread_level_ = 0;
};

// Whether MPI_Init has run in this process (and MPI_Finalize not yet).
bool mpi_running();
// "MPI_THREAD_MULTIPLE" etc., for messages.
const char* mpi_thread_level_name(int level);
// "<call> failed: <MPI_Error_string of code>", the text every accel MPI error ends with.
std::string mpi_error_text(const char* call, int code);

}  // namespace accel
