// CallSite: who started a collective, for the ledger and the stall reports: the user's file:line
// (std::source_location, filled in by default arguments at the API), or a name an internal caller
// gives itself ("reducer bucket 3", "zero all-gather unit 5").
#pragma once

#include <source_location>
#include <string>

namespace accel {

struct CallSite {
  // NOLINTNEXTLINE: implicit, so that a default argument `CallSite site = {}` records the caller
  CallSite(std::source_location where = std::source_location::current())
      : file(where.file_name()), line(where.line()) {}
  CallSite(std::string name) : label(std::move(name)) {}  // NOLINT: implicit, so "reducer bucket 3" reads
  CallSite(const char* name) : label(name) {}             // NOLINT

  // An internal caller that synchronises gradients (a reducer bucket, a ZeRO reduce-scatter): the
  // timeline's straggler summary measures each rank's compute up to the first of these in a step.
  static CallSite gradient_sync(std::string name) {
    CallSite site(std::move(name));
    site.synchronises_gradients = true;
    return site;
  }

  std::string label;
  bool synchronises_gradients = false;
  const char* file = nullptr;  // static storage (source_location's)
  unsigned line = 0;

  // "train.cpp:88" (the file's last path component) or the label.
  std::string str() const;
};

}  // namespace accel
