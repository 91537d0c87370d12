// The Strategy seam on one process: the unit hooks a per-unit strategy (ZeRO-3, FSDP) builds on fire
// around each unit's forward and after its backward, may replace a unit's output, and leave with the
// strategy; the replicated defaults (norm, step, zero_grad, state) are the plain ones; CheckpointIO
// round-trips a model's state.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "accel.h"
#include "runtime/strategy/single_device.h"

using namespace accel;

namespace {

// Hooks every GPTBlock of a model as a unit and logs what the Strategy calls.
struct UnitLog final : Strategy {
  std::vector<std::string> log;
  bool double_outputs = false;

  std::string name() const override { return "unit_log"; }
  void prepare_model(nn::Module& model) override {
    std::vector<nn::Module*> units;
    for (const auto& [name, m] : model.named_modules())
      if (m->type_name() == "GPTBlock") units.push_back(m);
    hook_units(units);
    for (const auto& [name, m] : model.named_modules()) names[m] = name;
  }
  DataShard data_shard() const override { return {}; }

  std::map<const nn::Module*, std::string> names;

 protected:
  void before_unit_forward(nn::Module& unit) override { log.push_back("gather " + names[&unit]); }
  void after_unit_forward(nn::Module& unit, Tensor& output) override {
    log.push_back("free " + names[&unit]);
    if (double_outputs) output = output * 2.0;
  }
  void after_unit_backward(nn::Module& unit) override { log.push_back("reduce-scatter " + names[&unit]); }
};

nn::GPT tiny_gpt(Generator& gen) {
  return nn::GPT({.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8}, gen);
}

Tensor tokens() { return from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}); }

}  // namespace

TEST_CASE("unit hooks: each unit is gathered before its forward, freed after it, and reduced after its backward") {
  Generator gen(0);
  nn::GPT gpt = tiny_gpt(gen);
  UnitLog strategy;
  strategy.prepare_model(gpt);
  backward(sum(gpt.forward(tokens())));
  CHECK(strategy.log == std::vector<std::string>{"gather blocks.0", "free blocks.0", "gather blocks.1", "free blocks.1",
                                                 "reduce-scatter blocks.1", "reduce-scatter blocks.0"});
}

TEST_CASE("unit hooks: after_unit_forward may replace a unit's output, and the hooks leave with the strategy") {
  Generator gen(0);
  nn::GPT gpt = tiny_gpt(gen);
  const std::vector<float> plain = gpt.forward(tokens()).to_vector<float>();
  {
    UnitLog strategy;
    strategy.double_outputs = true;
    strategy.prepare_model(gpt);
    const std::vector<float> changed = gpt.forward(tokens()).to_vector<float>();
    CHECK(changed != plain);
    CHECK(strategy.log.size() == 4);
  }
  // The strategy is gone, and so are its hooks: the model computes as before.
  CHECK(gpt.forward(tokens()).to_vector<float>() == plain);
}

TEST_CASE("the replicated defaults: grad_norm over local grads (2, 1 and inf), the optimizer's own step and state") {
  SingleDevice strategy(Device::cpu());
  Tensor a = from_vector<float>({3, 0}).requires_grad_();
  Tensor b = from_vector<float>({-4}).requires_grad_();
  a.set_grad(from_vector<float>({3, 0}));
  b.set_grad(from_vector<float>({-4}));
  Tensor no_grad_param = ones({2}).requires_grad_();
  const std::vector<Tensor> params{a, b, no_grad_param};
  CHECK(strategy.local_grads(params).size() == 2);
  CHECK(strategy.grad_norm(params, 2.0) == doctest::Approx(5.0));
  CHECK(strategy.grad_norm(params, 1.0) == doctest::Approx(7.0));
  CHECK(strategy.grad_norm(params, INFINITY) == 4.0);
  CHECK(strategy.grad_norm({no_grad_param}, 2.0) == 0.0);
  optim::SGD sgd({a, b}, {.lr = 1.0});
  strategy.optimizer_step(sgd);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 0});
  CHECK(strategy.optimizer_state_dict(sgd).size() == sgd.state_dict().size());
  strategy.zero_grad(sgd, true);
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("SafetensorsCheckpointIO writes a model's state and reads the same tensors back") {
  Generator gen(3);
  nn::Linear lin(3, 2, true, gen);
  const std::string path = (std::filesystem::temp_directory_path() / "accel_test_checkpoint_io.safetensors").string();
  SafetensorsCheckpointIO io;
  io.save(path, lin.state_dict(), {{"format", "pt"}});
  const nn::StateDict back = io.load(path);
  REQUIRE(back.size() == 2);
  // Loading restores by name: the file keeps its own order.
  nn::Linear restored(3, 2, true, gen);
  CHECK(restored.load_state_dict(back).missing.empty());
  CHECK(restored.weight().to_vector<float>() == lin.weight().to_vector<float>());
  CHECK(restored.bias().to_vector<float>() == lin.bias().to_vector<float>());
  std::filesystem::remove(path);
}

TEST_CASE("precision recipes: names, policy lines, and state only where there is some") {
  FullPrecision full;
  CHECK(full.name() == "no");
  CHECK(full.describe() == "param f32, compute f32, reduction f32, grad_comm f32, no loss scaler");
  CHECK(full.loss_scaler() == nullptr);
  CHECK(full.state_dict().empty());
  CHECK_THROWS_WITH_AS(full.load_state_dict({{"scale", scalar_tensor(2.0, DType::f64)}}),
                       "Precision::load_state_dict: mixed_precision=no keeps no state, but got 1 entries (the first "
                       "is 'scale')",
                       Error);
  HalfPrecision bf16(PrecisionPolicy::from_settings("bf16"));
  CHECK(bf16.name() == "bf16");
  CHECK_FALSE(bf16.scales_grads());
  Fp16Precision fp16(PrecisionPolicy::from_settings("fp16"), {}, nullptr);
  CHECK(fp16.name() == "fp16");
  CHECK(fp16.scales_grads());
  CHECK(fp16.scale_loss(scalar_tensor(1.5)).item() == 1.5 * 65536);
  // An overflow is found once per step; finish_step skips it, halves the scale and re-arms the check.
  Tensor g = from_vector<float>({65536, INFINITY});
  CHECK(fp16.unscale_and_check({g}));
  CHECK(fp16.unscale_and_check({g}));  // already unscaled this step: same answer, no second division
  CHECK(g.to_vector<float>()[0] == 1.0f);
  CHECK_FALSE(fp16.finish_step(true));
  CHECK(fp16.loss_scaler()->scale() == 32768);
  CHECK_THROWS_WITH_AS(HalfPrecision(PrecisionPolicy{}), "HalfPrecision: the compute dtype must be f16 or bf16, got f32",
                       Error);
}
