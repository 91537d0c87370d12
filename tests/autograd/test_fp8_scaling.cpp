// Delayed scaling against Transformer Engine's amax_and_scale_update: the history roll, the amax
// (max or most recent), the scale formula bit for bit, and the cases that keep the old scale.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/fp8/delayed_scaling.h"
#include "kernels/error.h"

using namespace accel;
using namespace accel::fp8;

namespace {
// A filled history whose values are distinct, with the max away from both ends.
std::vector<float> filled_history(int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = 0.5f + static_cast<float>((i * 37) % 101) / 16.0f;
  h[static_cast<size_t>(n / 2)] = 9.75f;
  return h;
}
}  // namespace

TEST_CASE("one step of delayed scaling reproduces Transformer Engine's update exactly") {
  for (const int margin : {0, 2}) {
    for (const AmaxAlgorithm algo : {AmaxAlgorithm::max, AmaxAlgorithm::most_recent}) {
      RecipeOptions options;
      options.margin = margin;
      options.amax_compute_algo = algo;
      options.amax_history_len = 16;
      ScalingState state(16);
      state.history = filled_history(16);
      state.scale = 3.0f;
      const std::vector<float> before = state.history;
      state.record(0.25f);  // below history[0] (0.5): the step's amax stays history[0]
      CHECK(state.history[0] == before[0]);
      state.update(options, kFloat8E4M3Max);
      // The rolled history: old[i + 1] at i, old[0] at the back, a 0 in front.
      CHECK(state.history[0] == 0.0f);
      for (size_t i = 1; i + 1 < before.size(); ++i) CHECK(state.history[i] == before[i + 1]);
      CHECK(state.history.back() == before[0]);
      const float amax = algo == AmaxAlgorithm::max ? 9.75f : before[0];
      const float want = 448.0f / amax / std::pow(2.0f, static_cast<float>(margin));
      INFO("margin ", margin, " algo ", name_in(kAmaxAlgorithmNames, algo));
      CHECK(state.scale == want);  // bit for bit: the 2^-margin factor is exact
    }
  }
}

TEST_CASE("amax 0, inf or NaN keeps the old scale; NaN is recorded as +inf") {
  RecipeOptions options;
  options.amax_history_len = 4;
  ScalingState state(4);
  state.scale = 5.0f;
  state.update(options, kFloat8E5M2Max);  // all zeros
  CHECK(state.scale == 5.0f);
  state.record(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isinf(state.history[0]));
  state.update(options, kFloat8E5M2Max);
  CHECK(state.scale == 5.0f);
  CHECK(std::isinf(state.history.back()));
  // With max, the inf stays in the window for its length; most_recent recovers at once.
  state.record(4.0f);
  options.amax_compute_algo = AmaxAlgorithm::most_recent;
  state.update(options, kFloat8E5M2Max);
  CHECK(state.scale == 57344.0f / 4.0f);
}

TEST_CASE("history length 1 and the recipe's options") {
  RecipeOptions options;
  options.amax_history_len = 1;
  ScalingState state(1);
  state.record(7.0f);
  state.update(options, kFloat8E4M3Max);
  CHECK(state.scale == 64.0f);
  CHECK(state.history == std::vector<float>{0.0f});
  CHECK(RecipeOptions{}.describe() == "HYBRID, margin 0, amax max over 1024 steps, first/last Linear in bf16");
  CHECK(RecipeOptions{}.dtype_of(Role::grad_output) == DType::f8_e5m2);
  CHECK(RecipeOptions{.format = Format::e4m3}.dtype_of(Role::grad_output) == DType::f8_e4m3);
  CHECK(RecipeOptions{}.dtype_of(Role::weight) == DType::f8_e4m3);
  CHECK_THROWS_WITH_AS(RecipeOptions{.amax_history_len = 0}.validate(),
                       "fp8 recipe: amax_history_len is 0, expected at least 1", Error);
  CHECK_THROWS_WITH_AS(ScalingState(0), "fp8 ScalingState: amax history length is 0, expected at least 1", Error);
  CHECK_THROWS_WITH_AS(RecipeOptions{.margin = -1}.validate(), "fp8 recipe: margin is -1, expected 0 or more", Error);
}
