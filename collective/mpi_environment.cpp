// MpiEnvironment: MPI_Init_thread / MPI_Finalize, done at most once and only by their owner.
#include "collective/mpi_environment.h"

#include <fmt/format.h>
#include <mpi.h>

#include "kernels/error.h"

namespace accel {

const char* mpi_thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown MPI thread level";
}

std::string mpi_error_text(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("{} failed: MPI error code {}", call, code);
  return fmt::format("{} failed: {}", call, std::string(text, length));
}

namespace {
void check(const char* call, int rc) {
  if (rc != MPI_SUCCESS) throw Error("MpiEnvironment: " + mpi_error_text(call, rc));
}
}  // namespace

MpiEnvironment::MpiEnvironment() { init(nullptr, nullptr); }

MpiEnvironment::MpiEnvironment(int& argc, char**& argv) { init(&argc, &argv); }

void MpiEnvironment::init(int* argc, char*** argv) {
  int finalized = 0, initialized = 0;
  check("MPI_Finalized", MPI_Finalized(&finalized));
  if (finalized) throw Error("MpiEnvironment: MPI was already finalised, and MPI cannot start twice in one process");
  check("MPI_Initialized", MPI_Initialized(&initialized));
  if (initialized) {
    check("MPI_Query_thread", MPI_Query_thread(&thread_level_));
    return;
  }
  // Each communicator makes its MPI calls from its own communication thread, beside the caller's.
  check("MPI_Init_thread", MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
  // Errors that belong to no communicator of ours are raised on MPI_COMM_WORLD; return them as codes
  // (which accel turns into accel::Error) instead of aborting. Only done when we own MPI.
  const int rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    MPI_Finalize();  // the destructor will not run after a throwing constructor
    check("MPI_Comm_set_errhandler", rc);
  }
  initialised_here_ = true;
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

MpiEnvironment::~MpiEnvironment() {
  if (!initialised_here_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A destructor cannot throw and has nobody to report to; a failing MPI_Finalize is left to MPI.
  if (!finalized) MPI_Finalize();
}

}  // namespace accel
