// mixed_precision fp8 through the Accelerator on every rank: one max all-reduce of the amaxes per
// optimizer step (none with one process, one per window under accumulation), ranks that see different
// data hold bitwise-equal scales, histories and weights after 50 steps, and save_state at step 25 with
// load_state and 25 more steps equals 50 steps without a break, bit for bit.
#include <cstring>
#include <string>
#include <vector>

#include "../ddp/support.h"

using namespace test;

namespace {

// A short history, so that it rolls over within the 50 steps and the checkpoint carries a full one.
AcceleratorOptions fp8_options(int accumulation = 1) {
  AcceleratorOptions o = options();
  o.mixed_precision = "fp8";
  o.fp8_recipe = fp8::RecipeOptions{.amax_history_len = 16, .include_first_last = true};
  o.gradient_accumulation_steps = accumulation;
  return o;
}

struct Run {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
};

Run start(int accumulation = 1) {
  Run r;
  r.accelerator = std::make_unique<Accelerator>(fp8_options(accumulation));
  r.model = make_mlp(7);
  r.optimizer = make_optimizer("adamw", r.model->parameters());
  r.accelerator->prepare(r.model, r.optimizer);
  return r;
}

// Micro-step `step` on this rank: each rank its own batch, so its amaxes differ from the others'.
void micro_step(Run& r, int step) {
  Generator gen(1000 * static_cast<uint64_t>(step) + static_cast<uint64_t>(r.accelerator->process_index()));
  const Tensor x = randn({16, 8}, gen) * (1.0 + 0.05 * step);  // amaxes that change from step to step
  const Tensor y = narrow(tanh(x), 1, 0, 4);
  auto scope = r.accelerator->accumulate();
  r.optimizer->zero_grad();
  const Tensor diff = r.model->forward(x) - y;
  r.accelerator->backward(mean(diff * diff));
  r.optimizer->step();
}

int64_t amax_reductions(const Accelerator& accelerator) {
  if (!accelerator.communicator()) return 0;
  int64_t n = 0;
  for (const LedgerEntry& e : accelerator.communicator()->ledger().entries())
    if (e.site == "fp8 amaxes") {
      CHECK(e.op == "all_reduce");
      ++n;
    }
  return n;
}

// Every FP8 Linear's histories and scales, then the weights, as doubles.
std::vector<double> fp8_state_and_weights(const Run& r) {
  std::vector<double> out;
  for (const auto& [name, t] : r.accelerator->precision().state_dict())
    for (const float v : t.to_vector<float>()) out.push_back(v);
  const std::vector<double> w = weights_of(*r.model);
  out.insert(out.end(), w.begin(), w.end());
  return out;
}

const Fp8Precision& fp8_of(const Run& r) { return dynamic_cast<const Fp8Precision&>(r.accelerator->precision()); }

}  // namespace

TEST_CASE("fp8: one all-reduce of the amaxes per optimizer step, none with one process") {
  Run r = start();
  CHECK(fp8_of(r).fp8_linear_names() == std::vector<std::string>{"0", "2", "4"});
  const int64_t before = amax_reductions(*r.accelerator);
  CHECK(before == 0);
  for (int step = 0; step < 10; ++step) {
    micro_step(r, step);
    CHECK(amax_reductions(*r.accelerator) == (r.accelerator->num_processes() > 1 ? step + 1 : 0));
  }
  // The step's amaxes went into the history's back and a fresh slot opened in front.
  const fp8::ScalingState& input = fp8_of(r).scaling("2").roles[0];
  CHECK(input.history[0] == 0.0f);
  CHECK(input.history.back() > 0.0f);
  CHECK(input.scale != 1.0f);
}

TEST_CASE("fp8 with gradient accumulation: the amaxes are reduced once per window, at the syncing micro-step") {
  Run r = start(2);
  const bool several = r.accelerator->num_processes() > 1;
  for (int step = 0; step < 8; ++step) {
    micro_step(r, step);
    CHECK(amax_reductions(*r.accelerator) == (several ? (step + 1) / 2 : 0));
  }
  CHECK(r.accelerator->completed_steps() == 4);
}

TEST_CASE("fp8: after 50 steps on different data every rank holds the same scales, histories and weights") {
  Run r = start();
  for (int step = 0; step < 50; ++step) micro_step(r, step);
  const std::vector<double> state = fp8_state_and_weights(r);
  CHECK(state.size() > 3 * 3 * 17);
  CHECK(differs_across_ranks(state) == "");
  // Each rank's own data gave it its own amaxes: without the all-reduce the histories would differ.
  const float last_input_amax = fp8_of(r).scaling("0").roles[0].history.back();
  CHECK(last_input_amax > 0.0f);
}

TEST_CASE("fp8: save_state at step 25, load_state and 25 more steps equal 50 steps bitwise") {
  const std::string dir = shared_temp_dir();
  std::vector<double> straight;
  {
    Run r = start();
    for (int step = 0; step < 50; ++step) {
      micro_step(r, step);
      if (step == 24) r.accelerator->save_state(dir + "/ckpt");
    }
    straight = fp8_state_and_weights(r);
  }
  Run resumed = start();
  resumed.accelerator->load_state(dir + "/ckpt");
  // The loaded scaling is the saved one, not a fresh one: the scales are no longer 1.
  CHECK(fp8_of(resumed).scaling("2").roles[1].scale != 1.0f);
  for (int step = 25; step < 50; ++step) micro_step(resumed, step);
  const std::vector<double> after = fp8_state_and_weights(resumed);
  REQUIRE(after.size() == straight.size());
  CHECK(std::memcmp(after.data(), straight.data(), after.size() * sizeof(double)) == 0);
  CHECK(differs_across_ranks(after) == "");
}
