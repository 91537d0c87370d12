// A prepared LR scheduler counts what Accelerate's AcceleratedScheduler counts, on every rank count
// the suite runs: nothing on accumulation micro-steps or fp16-skipped steps, num_processes per real
// optimizer step (one with split_batches), and every call with step_scheduler_with_optimizer off.
#include <limits>

#include "support.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace test {

namespace {

struct Run {
  int accumulation = 1;
  bool split_batches = false;
  bool with_optimizer = true;
  std::string mixed_precision = "no";
  int64_t overflow_at = -1;  // a micro-step whose grads get an inf on the last rank
};

// 6 micro-steps, each followed by scheduler.step(); returns the scheduler's count.
int64_t scheduler_count(const Run& run) {
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = run.accumulation;
  o.split_batches = run.split_batches;
  o.step_scheduler_with_optimizer = run.with_optimizer;
  o.mixed_precision = run.mixed_precision;
  Accelerator accelerator(o);
  Generator gen(2);
  auto model = std::make_shared<nn::Linear>(4, 2, true, gen);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto schedule = std::make_shared<optim::LRScheduler>(optim::LRScheduler::linear_warmup(*optimizer, 100));
  auto [net, opt, sched] = accelerator.prepare(model, optimizer, schedule);
  for (int64_t micro = 0; micro < 6; ++micro) {
    auto window = accelerator.accumulate();
    opt->zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = nn::mse_loss((*net)(ones({2, 4})), zeros({2, 2}));
    }
    accelerator.backward(loss);
    if (micro == run.overflow_at && accelerator.process_index() == accelerator.num_processes() - 1)
      nograd::fill_(nograd::narrow(nograd::reshape(net->parameters()[0].grad(), {-1}), 0, 0, 1),
                    std::numeric_limits<double>::infinity());
    opt->step();
    sched->step();
  }
  return sched->step_count();
}

}  // namespace

TEST_CASE("a prepared scheduler counts real optimizer steps, num_processes each, as Accelerate's does") {
  const int64_t n = world()->size();
  CHECK(scheduler_count({}) == 6 * n);
  CHECK(scheduler_count({.split_batches = true}) == 6);
  CHECK(scheduler_count({.accumulation = 2}) == 3 * n);  // not on the micro-steps inside a window
  CHECK(scheduler_count({.accumulation = 3, .split_batches = true}) == 2);
  CHECK(scheduler_count({.mixed_precision = "fp16", .overflow_at = 2}) == 5 * n);  // the skipped step counts not
  CHECK(scheduler_count({.accumulation = 2, .with_optimizer = false}) == 6);       // every call
}

TEST_CASE("a scheduler that is not prepared counts every call") {
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 2;
  Accelerator accelerator(o);
  Generator gen(2);
  auto model = std::make_shared<nn::Linear>(4, 2, true, gen);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  optim::LRScheduler schedule = optim::LRScheduler::linear_warmup(*optimizer, 100);
  auto [net, opt] = accelerator.prepare(model, optimizer);
  for (int i = 0; i < 4; ++i) {
    auto window = accelerator.accumulate();
    opt->zero_grad();
    accelerator.backward(nn::mse_loss((*net)(ones({2, 4})), zeros({2, 2})));
    opt->step();
    schedule.step();
  }
  CHECK(schedule.step_count() == 4);
}

}  // namespace test
