// TrainingStep: the order of one optimizer step, and the set of grads a precision unscales.
#include "runtime/training_step.h"

#include <unordered_set>

#include "collective/timeline.h"

namespace accel {

TrainingStep::TrainingStep(GradientAccumulation& accumulation, Precision& precision, Strategy& strategy,
                           SchedulerStepping scheduling)
    : accumulation_(accumulation), precision_(precision), strategy_(strategy), scheduling_(scheduling) {}

void TrainingStep::add(const std::shared_ptr<optim::Optimizer>& optimizer) {
  optimizers_.push_back(optimizer);
  optimizer->set_step_hook(weak_from_this());
}

void TrainingStep::add(const std::shared_ptr<optim::LRScheduler>& scheduler) {
  scheduler->set_step_hook(std::weak_ptr<optim::SchedulerHook>(shared_from_this()));
}

int64_t TrainingStep::steps_per_call() {
  if (!scheduling_.with_optimizer) return 1;
  if (!accumulation_.sync_gradients() || last_step_skipped_) return 0;
  return scheduling_.processes;
}

void TrainingStep::step(optim::Optimizer& optimizer) {
  if (!accumulation_.sync_gradients()) return;  // inside a window: keep accumulating
  const timeline::Span span("optimizer step");
  accumulation_.grads_used();
  if (!optimizers_.empty() && optimizers_.front().lock().get() == &optimizer) ++completed_steps_;
  last_step_skipped_ = false;
  const bool found_inf = precision_.unscale_and_check(grads_to_unscale({}));
  if (!precision_.finish_step(found_inf)) {
    last_step_skipped_ = true;  // every rank skips: they agreed on found_inf
    return;
  }
  if (observer_) observer_->before_update(optimizer);
  strategy_.optimizer_step(optimizer);
  precision_.weights_changed();
  if (observer_) observer_->after_update(optimizer);
}

void TrainingStep::zero_grad(optim::Optimizer& optimizer, bool set_to_none) {
  if (accumulation_.may_clear_grads()) strategy_.zero_grad(optimizer, set_to_none);
}

std::vector<Tensor> TrainingStep::grads_to_unscale(const std::vector<Tensor>& extra) const {
  std::vector<Tensor> params;
  for (const auto& weak : optimizers_)
    if (auto opt = weak.lock()) params.insert(params.end(), opt->params().begin(), opt->params().end());
  params.insert(params.end(), extra.begin(), extra.end());
  std::vector<Tensor> grads;
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& g : strategy_.local_grads(params))
    if (seen.insert(g.impl()).second) grads.push_back(g);
  return grads;
}

}  // namespace accel
