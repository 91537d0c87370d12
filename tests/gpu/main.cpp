// Entry point of the CUDA test executables. Built with ACCEL_TESTS_NEED_GPU (test_gpu), it filters
// out every test case when no CUDA device is visible, so doctest reports each one as skipped, and
// exits 77, which meson shows as SKIP, never as a pass. With ACCEL_TEST_RESULTS set, one JSON line
// per test case (name, status, time, assertions) is appended to that file for tests/gpu/run.sh.
// Built with ACCEL_TESTS_MPI (test_gpu_dist, run under mpirun), every rank runs the tests, rank 0
// alone reports and writes results, the "nccl:" cases are skipped unless each rank has a GPU of its
// own, and the exit status is non-zero on every rank when any rank failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensor/cuda/device.h"

#if ACCEL_TESTS_MPI
#include <mpi.h>

#include <memory>

#include "collective/mpi_communicator.h"
#include "collective/mpi_environment.h"
#include "tests/gpu/dist_support.h"
#endif

namespace {

int skipped_count = 0;
std::string executable_name = "?";  // argv[0] without its directory

std::string json_escape(const char* s) {
  std::string out;
  for (; *s != '\0'; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Writes each test case's outcome as it finishes; a crash therefore leaves the earlier lines.
struct ResultsListener : doctest::IReporter {
  explicit ResultsListener(const doctest::ContextOptions&) {
    if (const char* path = std::getenv("ACCEL_TEST_RESULTS"); path != nullptr && *path != '\0')
      file_ = std::fopen(path, "a");
  }
  ~ResultsListener() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  void write(const doctest::TestCaseData& tc, const char* status, double seconds, int asserts, int failed) {
    if (file_ == nullptr) return;
    std::fprintf(file_,
                 "{\"executable\": \"%s\", \"name\": \"%s\", \"status\": \"%s\", \"seconds\": %.3f, \"asserts\": %d, "
                 "\"failed_asserts\": %d}\n",
                 json_escape(executable_name.c_str()).c_str(), json_escape(tc.m_name).c_str(), status, seconds, asserts, failed);
    std::fflush(file_);
  }

  void test_case_start(const doctest::TestCaseData& tc) override { current_ = &tc; }
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    if (current_ != nullptr)
      write(*current_, stats.testCaseSuccess ? "passed" : "failed", stats.seconds, stats.numAssertsCurrentTest,
            stats.numAssertsFailedCurrentTest);
    current_ = nullptr;
  }
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    ++skipped_count;
    write(tc, "skipped", 0.0, 0, 0);
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}

 private:
  std::FILE* file_ = nullptr;
  const doctest::TestCaseData* current_ = nullptr;
};

}  // namespace

DOCTEST_REGISTER_LISTENER("accel_results", 1, ResultsListener);

#if ACCEL_TESTS_MPI
namespace accel::gpu_test {
namespace {
Communicator* world_communicator = nullptr;
}
Communicator& world() { return *world_communicator; }
}  // namespace accel::gpu_test
#endif

int main(int argc, char** argv) {
#if ACCEL_TESTS_MPI
  accel::MpiEnvironment environment(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) unsetenv("ACCEL_TEST_RESULTS");  // rank 0 speaks for the job
#endif
  if (argc > 0) {
    executable_name = argv[0];
    executable_name = executable_name.substr(executable_name.find_last_of('/') + 1);
  }
  doctest::Context context(argc, argv);
#if ACCEL_TESTS_NEED_GPU
  const bool gpu = accel::cuda::is_available();
#else
  const bool gpu = true;  // the host-side tests run everywhere
#endif
  if (!gpu) context.addFilter("test-case-exclude", "*");
#if ACCEL_TESTS_MPI
  executable_name += " np" + std::to_string(size);
  if (rank != 0) context.setOption("minimal", true);
  // NCCL wants a GPU per rank; ranks sharing one are the mpi backend's case.
  if (gpu && size > accel::cuda::device_count()) context.addFilter("test-case-exclude", "nccl:*");
  int rc = 1;
  try {
    auto world = std::make_unique<accel::MpiCommunicator>(MPI_COMM_WORLD);
    accel::gpu_test::world_communicator = world.get();
    rc = context.run();
    accel::gpu_test::world_communicator = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }
  int failed = rc != 0 ? 1 : 0, ranks_failed = 0;
  MPI_Allreduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (context.shouldExit()) return rc;
  if (ranks_failed > 0) {
    if (rank == 0) std::printf("GPU tests FAILED on %d of %d ranks\n", ranks_failed, size);
    return 1;
  }
  if (gpu) return 0;
  if (rank == 0)
    std::printf("no CUDA device: %d GPU tests skipped (%s)\n", skipped_count, accel::cuda::unavailable_reason().c_str());
  return 77;
#else
  const int rc = context.run();
  if (context.shouldExit() || gpu) return rc;
  std::printf("no CUDA device: %d GPU tests skipped (%s)\n", skipped_count, accel::cuda::unavailable_reason().c_str());
  return rc != 0 ? rc : 77;
#endif
}
