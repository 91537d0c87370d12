// accel::Error, the one exception type of the library, and the check macro that throws it. It sits at
// the lowest floor so that the kernels' launch checks throw the same type as every layer above.
#pragma once

#include <stdexcept>
#include <string>

namespace accel {

// Every message names the function, the values it got and what it expected:
//   "matmul: inner dims differ: [32, 64] x [32, 10]"
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace accel

// Throws accel::Error(message) when cond is false; message is only built on failure.
#define ACCEL_CHECK(cond, message)                 \
  do {                                             \
    if (!(cond)) throw ::accel::Error(message);    \
  } while (0)
