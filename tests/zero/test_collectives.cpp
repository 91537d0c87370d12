// The collectives each stage runs, counted at the communicator: nothing on the early micro-steps of
// an accumulation window, one reduce-scatter per unit on the backward that syncs, one all-gather per
// unit after the step.
#include "counting_communicator.h"
#include "zero_support.h"

namespace test {

namespace {

int total(const CountingCommunicator& c) {
  int n = 0;
  for (const char* kind : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "barrier", "send", "recv"})
    n += c.count(kind);
  return n;
}

Tensor loss_of(nn::Module& model, int64_t seed) {
  Generator gen(static_cast<uint64_t>(seed));
  return nn::mse_loss(model(randn({4, 7}, gen)), randn({4, 3}, gen));
}

}  // namespace

TEST_CASE("stages 1 and 2: no communication before the syncing backward, then one reduce-scatter per unit") {
  for (const int stage : {1, 2}) {
    INFO("rank ", world()->rank(), ", stage ", stage);
    auto counting = std::make_shared<CountingCommunicator>(world()->dup());
    ZeroStage12 strategy(stage, Device::cpu(), counting, DType::f32, /*bucket_cap_bytes=*/256);
    auto model = make_odd_mlp(5);
    auto adamw = make_optimizer("adamw", model->parameters());
    strategy.prepare_model(*model);
    strategy.prepare_optimizer(*adamw);
    const int units = static_cast<int>(strategy.units_of(*model).size());
    CHECK(units == 4);  // 18 + 5, 65, 13, 91 elements: buckets of at most 64 floats, or one parameter
    CHECK(counting->count("broadcast") == units);  // rank 0's initial values, one per unit
    counting->reset();
    for (int micro = 0; micro < 2; ++micro) {  // two early micro-steps: local only
      strategy.before_backward(false);
      backward(loss_of(*model, world()->rank() * 10 + micro));
      strategy.after_backward();
    }
    CHECK(total(*counting) == 0);
    strategy.before_backward(true);
    backward(loss_of(*model, world()->rank() * 10 + 2));
    strategy.after_backward();
    CHECK(counting->count("reduce_scatter") == units);
    CHECK(total(*counting) == units);
    // Each rank holds the averaged grad of its slices only.
    const std::vector<Tensor> grads = strategy.local_grads(model->parameters());
    REQUIRE(grads.size() == static_cast<size_t>(units));
    for (size_t u = 0; u < grads.size(); ++u) CHECK(grads[u].numel() == strategy.units_of(*model)[u]->shard_numel());
    // Stage 2 keeps no full grads after sending them; stage 1 keeps them until zero_grad.
    for (const Tensor& p : model->parameters()) CHECK(p.grad().defined() == (stage == 1));
    counting->reset();
    strategy.optimizer_step(*adamw);
    CHECK(counting->count("all_gather") == units);
    CHECK(total(*counting) == units);
  }
}

TEST_CASE("a unit's padded layout: every rank owns one contiguous slice, the padding stays zero") {
  const int n = world()->size();
  Generator gen(1);
  nn::Linear lin(3, 3, true, gen);  // 9 + 3 = 12 elements
  nn::Linear odd(2, 3, true, gen);  // 6 + 3 = 9 elements
  FlatUnit unit("odd", odd.named_parameters(), world()->rank(), n);
  CHECK(unit.numel() == 9);
  CHECK(unit.padded_numel() == (9 + n - 1) / n * n);
  CHECK(unit.shard_numel() * n == unit.padded_numel());
  CHECK(unit.shard_offset() == unit.shard_numel() * world()->rank());
  // The module's parameters are views of the flat buffer: writing one shows in the other.
  CHECK(odd.weight().data_ptr() == unit.full().data_ptr());
  CHECK(static_cast<float*>(odd.bias().data_ptr()) == unit.full().data<float>() + 6);
  const std::vector<float> flat = unit.full().to_vector<float>();
  for (int64_t i = 9; i < unit.padded_numel(); ++i) CHECK(flat[static_cast<size_t>(i)] == 0.0f);
}

}  // namespace test
