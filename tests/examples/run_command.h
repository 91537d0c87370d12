// run: a shell command's exit status and its stdout and stderr together, for the tests that run the
// examples as a user would.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace test_support {

struct Run {
  int status = -1;
  std::string output;
};

inline Run run(const std::string& command) {
  Run r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) r.output.append(buffer, n);
  r.status = pclose(pipe);
  return r;
}

}  // namespace test_support
