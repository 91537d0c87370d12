// Timing helpers the bench programs share: a steady clock, seconds elapsed, and the median that
// every table quotes (these machines are noisy).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace timing {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double seconds_of(const std::function<void()>& f) {
  const auto start = Clock::now();
  f();
  return seconds_since(start);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace timing
