// Preemption on every rank count the suite runs: a SIGTERM that reaches one rank (the last) stops every
// rank after the same optimizer step, never inside an accumulation window, and that step is the
// checkpoint saved when ProjectConfiguration names checkpoints automatically.
#include <csignal>
#include <filesystem>

#include "runtime/checkpoint/checkpoint_dir.h"
#include "support.h"

namespace test {

namespace {

struct StopTrace {
  std::vector<int64_t> micro_steps_stopped;  // the micro-steps where should_stop said true
  int64_t steps = 0;                         // completed_steps() after the loop
};

// Runs micro-steps of windows of 2; the last rank gets a SIGTERM during micro-step 4 (the first of
// the third window), after should_stop has listened for a while.
StopTrace train_until_stopped(Accelerator& accelerator) {
  auto model = std::make_shared<nn::Linear>(4, 2, true, *std::make_unique<Generator>(3));
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  StopTrace trace;
  for (int64_t micro = 0; micro < 12; ++micro) {
    auto window = accelerator.accumulate();
    opt->zero_grad();
    accelerator.backward(nn::mse_loss((*net)(ones({2, 4})), zeros({2, 2})));
    opt->step();
    if (micro == 4 && accelerator.process_index() == accelerator.num_processes() - 1) std::raise(SIGTERM);
    if (accelerator.should_stop()) trace.micro_steps_stopped.push_back(micro);
  }
  trace.steps = accelerator.completed_steps();
  return trace;
}

}  // namespace

TEST_CASE("should_stop: a SIGTERM on the last rank stops every rank after the same step, which is saved") {
  const std::string root = shared_temp_dir();
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 2;
  o.project_configuration = {.project_dir = root, .automatic_checkpoint_naming = true};
  {
    Accelerator accelerator(o);
    const StopTrace trace = train_until_stopped(accelerator);
    // Micro-step 4 opens a window: the stop waits for its end (5), and says true from then on.
    CHECK(trace.micro_steps_stopped == std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11});
    CHECK(trace.steps == 6);  // the loop went on; the checkpoint is of step 3
    const std::vector<std::filesystem::path> saved = complete_checkpoints(root);
    REQUIRE(saved.size() == 1);  // one save, though should_stop said true seven times
  }
  clear_preemption_request();
  Accelerator resumed(o);
  auto model = std::make_shared<nn::Linear>(4, 2, true, *std::make_unique<Generator>(4));
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = resumed.prepare(model, optimizer);
  resumed.load_state();
  CHECK(resumed.completed_steps() == 3);
  CHECK_FALSE(resumed.should_stop());  // the request was handled: a resumed run trains on
  world()->barrier();
  if (world()->rank() == 0) std::filesystem::remove_all(root);
}

TEST_CASE("should_stop without automatic checkpoint naming stops every rank and saves nothing") {
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 2;
  Accelerator accelerator(o);
  const StopTrace trace = train_until_stopped(accelerator);
  CHECK(trace.micro_steps_stopped.front() == 5);
  CHECK(trace.steps == 6);
  clear_preemption_request();
}

}  // namespace test
