// Entry point of the CUDA test executables. Built with ACCEL_TESTS_NEED_GPU (test_gpu), it filters
// out every test case when no CUDA device is visible, so doctest reports each one as skipped, and
// exits 77, which meson shows as SKIP, never as a pass. With ACCEL_TEST_RESULTS set, one JSON line
// per test case (name, status, time, assertions) is appended to that file for tests/gpu/run.sh.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensor/cuda/device.h"

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

int main(int argc, char** argv) {
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
  const int rc = context.run();
  if (context.shouldExit() || gpu) return rc;
  std::printf("no CUDA device: %d GPU tests skipped (%s)\n", skipped_count, accel::cuda::unavailable_reason().c_str());
  return rc != 0 ? rc : 77;
}
