// TrainingStep: what step() and zero_grad() of a prepared optimizer do. The optimizer hands both over
// to it (optim::StepHook): a step waits for the end of the accumulation window, lets the Precision
// unscale, check and decide (all ranks agree on an fp16 skip), lets the Strategy update, and tells
// the Precision that the masters changed. A prepared LR scheduler asks it how far to count
// (optim::SchedulerHook).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "runtime/gradient_accumulation.h"
#include "runtime/precision/precision.h"
#include "runtime/strategy/strategy.h"

namespace accel {

// How a prepared LR scheduler counts (Accelerate's rules).
struct SchedulerStepping {
  bool with_optimizer = true;  // step_scheduler_with_optimizer: only when the optimizer really stepped
  int64_t processes = 1;       // and then this many times: each rank's batch was one step's worth
};

// Watches the updates: called on every rank around each optimizer step that is not skipped (the one
// that ends an accumulation window), before and after the strategy's update. The sanity report is one.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void before_update(const optim::Optimizer& optimizer) = 0;
  virtual void after_update(const optim::Optimizer& optimizer) = 0;
};

class TrainingStep final : public optim::StepHook,
                           public optim::SchedulerHook,
                           public std::enable_shared_from_this<TrainingStep> {
 public:
  // The three outlive this object (the Accelerator owns them all and destroys this one first).
  TrainingStep(GradientAccumulation& accumulation, Precision& precision, Strategy& strategy,
               SchedulerStepping scheduling = {});

  // prepare: installs this as the optimizer's step hook. The optimizer holds it weakly, so one that
  // outlives the Accelerator steps plainly again.
  void add(const std::shared_ptr<optim::Optimizer>& optimizer);
  // prepare: the scheduler's step() then counts as SchedulerStepping says.
  void add(const std::shared_ptr<optim::LRScheduler>& scheduler);

  void step(optim::Optimizer& optimizer) override;
  void zero_grad(optim::Optimizer& optimizer, bool set_to_none) override;
  // 0 inside an accumulation window or after a skipped step, else SchedulerStepping's count.
  int64_t steps_per_call() override;

  // This rank's local grads of every prepared optimizer's parameters and of extra, each once: what
  // the precision unscales before a clip or a step.
  std::vector<Tensor> grads_to_unscale(const std::vector<Tensor>& extra) const;
  // Whether the last step() was skipped because some rank's grads overflowed.
  bool last_step_skipped() const { return last_step_skipped_; }
  // Optimizer steps taken (window ends of the first prepared optimizer, skipped ones included);
  // checkpoints carry the count.
  int64_t completed_steps() const { return completed_steps_; }
  void restore_completed_steps(int64_t steps) { completed_steps_ = steps; }
  // observer (or null: none) outlives this object or is replaced first.
  void set_observer(StepObserver* observer) { observer_ = observer; }

 private:
  GradientAccumulation& accumulation_;
  Precision& precision_;
  Strategy& strategy_;
  SchedulerStepping scheduling_;
  std::vector<std::weak_ptr<optim::Optimizer>> optimizers_;
  bool last_step_skipped_ = false;
  int64_t completed_steps_ = 0;
  StepObserver* observer_ = nullptr;
};

}  // namespace accel
