// A StateReader over a state in memory that counts the elements read from it: for the tests that show
// a rank reads only the runs it holds.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/state_reader.h"

namespace test_support {

class CountingStateReader final : public accel::StateReader {
 public:
  explicit CountingStateReader(accel::nn::StateDict state) : inner_(std::move(state)) { set_entries(inner_.entries()); }
  mutable int64_t elements = 0;

 private:
  accel::Tensor read_range(size_t i, int64_t first, int64_t count) const override {
    elements += count;
    return inner_.read(i, first, count);
  }
  accel::DictStateReader inner_;
};

}  // namespace test_support
