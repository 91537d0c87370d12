// Learning-rate schedules and the scheduler that steps them.
#include "optim/lr_schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "tensor/creation.h"

namespace accel::optim {

namespace {

void check_warmup(const char* fn, int64_t warmup_steps) {
  if (warmup_steps < 0) throw Error(fmt::format("{}: warmup_steps must be >= 0, got {}", fn, warmup_steps));
}

void check_cosine(double base_lr, double min_lr, int64_t warmup_steps, int64_t total_steps) {
  check_warmup("cosine_lr", warmup_steps);
  if (total_steps <= warmup_steps)
    throw Error(fmt::format("cosine_lr: total_steps {} must exceed warmup_steps {}", total_steps, warmup_steps));
  if (!(min_lr >= 0.0 && min_lr <= base_lr))
    throw Error(fmt::format("cosine_lr: min_lr {} must be in [0, base_lr {}]", min_lr, base_lr));
}

}  // namespace

double constant_lr(double base_lr, int64_t) { return base_lr; }

double linear_warmup_lr(double base_lr, int64_t warmup_steps, int64_t step) {
  check_warmup("linear_warmup_lr", warmup_steps);
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  return base_lr;
}

double cosine_lr(double base_lr, double min_lr, int64_t warmup_steps, int64_t total_steps, int64_t step) {
  check_cosine(base_lr, min_lr, warmup_steps, total_steps);
  if (step < warmup_steps) return linear_warmup_lr(base_lr, warmup_steps, step);
  if (step >= total_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

LRScheduler::LRScheduler(Optimizer& optimizer, Schedule schedule)
    : optimizer_(&optimizer), schedule_(std::move(schedule)) {
  if (!schedule_) throw Error("LRScheduler: the schedule is empty");
  optimizer_->set_lr(schedule_(0));
}

LRScheduler LRScheduler::constant(Optimizer& optimizer) {
  const double base = optimizer.lr();
  return LRScheduler(optimizer, [base](int64_t step) { return constant_lr(base, step); });
}

LRScheduler LRScheduler::linear_warmup(Optimizer& optimizer, int64_t warmup_steps) {
  check_warmup("linear_warmup_lr", warmup_steps);
  const double base = optimizer.lr();
  return LRScheduler(optimizer,
                     [base, warmup_steps](int64_t step) { return linear_warmup_lr(base, warmup_steps, step); });
}

LRScheduler LRScheduler::cosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr) {
  const double base = optimizer.lr();
  check_cosine(base, min_lr, warmup_steps, total_steps);
  return LRScheduler(optimizer, [=](int64_t step) { return cosine_lr(base, min_lr, warmup_steps, total_steps, step); });
}

void LRScheduler::step() {
  const auto hook = hook_.lock();
  const int64_t steps = hook ? hook->steps_per_call() : 1;
  if (steps == 0) return;
  step_ += steps;
  optimizer_->set_lr(schedule_(step_));
}

StateDict LRScheduler::state_dict() const { return {{"step", scalar_tensor(static_cast<double>(step_), DType::i64)}}; }

void LRScheduler::load_state_dict(const StateDict& state) {
  if (state.size() != 1 || state[0].first != "step" || !state[0].second.defined() || state[0].second.dim() != 0)
    throw Error(fmt::format("LRScheduler::load_state_dict: expected exactly one 0-d entry \"step\", got {} entries{}",
                            state.size(), state.empty() ? "" : fmt::format(" starting with \"{}\"", state[0].first)));
  const double step = state[0].second.item();
  if (step < 0) throw Error(fmt::format("LRScheduler::load_state_dict: step must be >= 0, got {}", step));
  step_ = static_cast<int64_t>(step);
  optimizer_->set_lr(schedule_(step_));
}

}  // namespace accel::optim
