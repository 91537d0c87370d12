// Learning-rate schedules: pure functions of the step, and an LRScheduler that applies one to an
// optimizer. Step s is the number of optimizer steps taken so far, so lr(0) drives the first update.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "optim/optimizer.h"

namespace accel::optim {

// base_lr at every step.
double constant_lr(double base_lr, int64_t step);
// base_lr * (s + 1) / warmup_steps while s < warmup_steps, then base_lr.
double linear_warmup_lr(double base_lr, int64_t warmup_steps, int64_t step);
// The linear warmup, then a half cosine from base_lr down to min_lr at s = total_steps, then
// min_lr: min_lr + (base_lr - min_lr) * (1 + cos(pi * (s - warmup) / (total - warmup))) / 2.
double cosine_lr(double base_lr, double min_lr, int64_t warmup_steps, int64_t total_steps, int64_t step);

// What a prepared scheduler's step() does is decided by its hook (the Accelerator's): how many schedule
// steps this call advances. 0 inside an accumulation window or after a skipped optimizer step.
class SchedulerHook {
 public:
  virtual ~SchedulerHook() = default;
  virtual int64_t steps_per_call() = 0;
};

class LRScheduler {
 public:
  using Schedule = std::function<double(int64_t step)>;
  // Sets the optimizer's lr to schedule(0) at once. The optimizer must outlive the scheduler.
  LRScheduler(Optimizer& optimizer, Schedule schedule);

  // The schedule's peak is the optimizer's lr at the time of the call.
  static LRScheduler constant(Optimizer& optimizer);
  static LRScheduler linear_warmup(Optimizer& optimizer, int64_t warmup_steps);
  static LRScheduler cosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr);

  // Call after each optimizer.step(): counts it and sets the lr for the next one. With a hook, the
  // hook says how many steps the call counts.
  void step();
  // Held weakly: a scheduler that outlives its hook steps plainly again.
  void set_step_hook(std::weak_ptr<SchedulerHook> hook) { hook_ = std::move(hook); }
  int64_t step_count() const { return step_; }
  double lr(int64_t step) const { return schedule_(step); }

  // {"step": 0-d i64}. Loading also sets the optimizer's lr for that step.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  Optimizer* optimizer_;
  Schedule schedule_;
  int64_t step_ = 0;
  std::weak_ptr<SchedulerHook> hook_;
};

}  // namespace accel::optim
