// Each ZeRO stage trains exactly as DDP does: same global batch, same init, 20 steps, with and
// without gradient accumulation, on a model whose parameter sizes divide by no world size.
#include "zero_support.h"

namespace test {

namespace {

void check_equal_to_ddp(ZeroSpec spec, double tolerance) {
  const int stage = spec.zero_stage;
  spec.zero_stage = 0;
  const ZeroRun ddp = train_zero(spec, 21);
  spec.zero_stage = stage;
  const ZeroRun zero = train_zero(spec, 21);
  REQUIRE(zero.losses.size() == static_cast<size_t>(spec.steps * spec.accumulation_steps));
  const double losses = max_rel_diff(zero.losses, ddp.losses);
  const double weights = max_rel_diff(zero.weights, ddp.weights);
  INFO("losses differ by ", losses, " relative, weights by ", weights);
  CHECK(ddp.strategy == "data_parallel");
  CHECK(zero.strategy == fmt::format("zero_{}", stage));
  CHECK(losses <= tolerance);
  CHECK(weights <= tolerance);
  CHECK(max_abs_diff(ddp.weights, weights_of(*make_odd_mlp(21))) > 1e-2);  // training moved them
  CHECK(differs_across_ranks(zero.weights) == "");
}

}  // namespace

TEST_CASE("ZeRO stages 1 and 2 equal DDP in f32 over 20 steps, with and without accumulation") {
  for (const int stage : {1, 2}) {
    for (const std::string optimizer : {"sgd", "adamw"}) {
      for (const int k : {1, 3}) {
        INFO("rank ", world()->rank(), " of ", world()->size(), ", stage ", stage, ", ", optimizer, ", accumulation ", k);
        check_equal_to_ddp({.zero_stage = stage, .optimizer = optimizer, .accumulation_steps = k}, 1e-6);
      }
    }
  }
}

TEST_CASE("ZeRO equals DDP on the ring backend too") {
  for (const int stage : {1, 2}) {
    INFO("rank ", world()->rank(), ", stage ", stage);
    check_equal_to_ddp({.zero_stage = stage, .accumulation_steps = 2, .backend = "ring"}, 1e-6);
  }
}

}  // namespace test
