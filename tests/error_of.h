// What the tests use to look at an error's text: the message of the accel::Error a call throws.
#pragma once

#include <string>

#include "kernels/error.h"

namespace test_support {

// The message of the accel::Error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const accel::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace test_support
