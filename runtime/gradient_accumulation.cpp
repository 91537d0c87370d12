// GradientAccumulation: where windows start and end, following the prepared loader when there is one.
#include "runtime/gradient_accumulation.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/error.h"

namespace accel {

GradientAccumulation::GradientAccumulation(int steps, std::shared_ptr<GradientState> state)
    : steps_(steps), state_(std::move(state)) {
  if (steps_ < 1)
    throw Error(fmt::format("GradientAccumulation: steps must be >= 1, got {}", steps_));
}

Scope GradientAccumulation::accumulate() {
  if (in_accumulate_) throw Error("Accelerator::accumulate: already inside an accumulate() scope");
  const int64_t k = steps_;
  GradientState& g = *state_;
  bool sync = false;
  if (g.batches != batches_seen_ && g.step >= 0) {
    // Follow the prepared loader: windows are [0, k), [k, 2k), ... of its epoch, the last one cut
    // short by the end of the data.
    batches_seen_ = g.batches;
    const int64_t start = g.step - g.step % k;
    window_ = std::min(k, g.steps_per_epoch - start);
    sync = g.step % k == k - 1 || g.step == g.steps_per_epoch - 1;
    micro_step_ = 0;
  } else {
    micro_step_ = micro_step_ % k + 1;
    window_ = k;
    sync = micro_step_ == k;
  }
  g.sync_gradients = sync;
  in_accumulate_ = true;
  return Scope([this] { in_accumulate_ = false; });
}

Scope GradientAccumulation::no_sync() {
  ++no_sync_depth_;
  return Scope([this] { --no_sync_depth_; });
}

bool GradientAccumulation::backward_syncs() const {
  return no_sync_depth_ == 0 && (!in_accumulate_ || state_->sync_gradients);
}

int64_t GradientAccumulation::loss_divisor() const { return accumulating() ? window_ : 1; }

void GradientAccumulation::backward_done() {
  if (accumulating() && !state_->sync_gradients) state_->grads_pending = true;
}

void GradientAccumulation::restore(const Position& position) {
  micro_step_ = position.micro_step;
  batches_seen_ = position.batches_seen;
  state_->batches = position.batches;
  state_->grads_pending = false;
  state_->sync_gradients = true;
}

}  // namespace accel
