// The combine steps the CUDA reductions use (kernels/reduce_math.h): combined in any tree order they
// must give the serial CPU loop's max and argmax, NaN and ties included.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/reduce_math.h"

using namespace accel;

namespace {

// The serial loop of cpu::argmax_rows: first maximum, first NaN wins.
int64_t serial_argmax(const std::vector<float>& v) {
  int64_t best_at = 0;
  float best = v[0];
  for (size_t j = 1; j < v.size() && !std::isnan(best); ++j)
    if (v[j] > best || std::isnan(v[j])) {
      best = v[j];
      best_at = static_cast<int64_t>(j);
    }
  return best_at;
}

// A warp-shuffle-shaped tree over `lanes` strided partial results, like the kernels' fold then reduce.
ArgMax<float> tree_argmax(const std::vector<float>& v, int lanes) {
  std::vector<ArgMax<float>> partial(static_cast<size_t>(lanes), argmax_identity<float>());
  for (size_t j = 0; j < v.size(); ++j) {
    auto& p = partial[j % static_cast<size_t>(lanes)];
    p = argmax_combine(p, ArgMax<float>{v[j], static_cast<int64_t>(j)});
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2)
    for (int lane = 0; lane < offset; ++lane)
      partial[static_cast<size_t>(lane)] =
          argmax_combine(partial[static_cast<size_t>(lane)], partial[static_cast<size_t>(lane + offset)]);
  return partial[0];
}

}  // namespace

TEST_CASE("reduce math: argmax in a tree equals the serial first maximum") {
  const std::vector<std::vector<float>> rows = {
      {1, 5, 3, 5, 2},                      // tie: the first 5
      {-1, -1, -1},                         // all equal: index 0
      {2, NAN, 7, NAN},                     // the first NaN wins over any number
      {NAN},                                //
      {-INFINITY, -INFINITY},               // the identity value itself occurs
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
       30, 31, 32, 31, 30, 32, 0},           // max 32 twice, at 32 and 35: lanes 0 and 3 of 32
  };
  for (const auto& row : rows)
    for (int lanes : {1, 2, 4, 32}) {
      const ArgMax<float> r = tree_argmax(row, lanes);
      CHECK(r.index == serial_argmax(row));
    }
}

TEST_CASE("reduce math: max lets NaN win in either argument, and starts from -inf") {
  CHECK(std::isnan(max_combine(1.0f, NAN)));
  CHECK(std::isnan(max_combine(NAN, 1.0f)));
  CHECK(max_combine(max_identity<float>(), -1e30f) == -1e30f);
  CHECK(max_identity<double>() == -INFINITY);
  CHECK(max_identity<int64_t>() == INT64_MIN);
  CHECK(max_combine<int64_t>(-3, 2) == 2);
}

TEST_CASE("reduce math: the empty candidate is neutral") {
  const ArgMax<float> e = argmax_identity<float>();
  const ArgMax<float> a{-INFINITY, 4};
  CHECK(argmax_combine(e, a).index == 4);
  CHECK(argmax_combine(a, e).index == 4);
  CHECK(argmax_combine(e, e).index == -1);
}
