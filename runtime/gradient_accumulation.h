// GradientAccumulation: accumulate() windows of k micro-batches and no_sync() scopes, and what they
// mean for each backward (does it sync across ranks, what is the loss divided by) and for each
// optimizer step (is the window complete, may zero_grad clear the grads yet).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/gradient_state.h"
#include "runtime/scope.h"

namespace accel {

class GradientAccumulation {
 public:
  // steps >= 1. state is shared with the DataLoaders the Accelerator prepares, whose position in
  // their epoch decides where windows end.
  GradientAccumulation(int steps, std::shared_ptr<GradientState> state);

  int steps() const { return steps_; }
  const std::shared_ptr<GradientState>& state() const { return state_; }

  // Opens one micro-step of a window (see Accelerator::accumulate).
  Scope accumulate();
  // Within this scope, backward leaves gradients local and never divides the loss.
  Scope no_sync();

  // For the backward about to run: whether it makes grads final across ranks, and what the loss is
  // divided by (the window's size inside accumulate(), else 1).
  bool backward_syncs() const;
  int64_t loss_divisor() const;
  // After that backward: an early micro-step leaves grads that zero_grad must keep.
  void backward_done();

  // True when the current micro-step ends a window (always outside accumulate()).
  bool sync_gradients() const { return state_->sync_gradients; }
  // For a prepared optimizer's step: the window's grads are used up now.
  void grads_used() { state_->grads_pending = false; }
  bool may_clear_grads() const { return !state_->grads_pending; }

  // Where the windows stand, for checkpoints (taken at a window boundary).
  struct Position {
    int64_t micro_step = 0;     // without a prepared loader: micro-steps of the window so far
    uint64_t batches_seen = 0;  // the loader batches accumulate() has followed
    uint64_t batches = 0;       // the batches every prepared loader produced
  };
  Position position() const { return {micro_step_, batches_seen_, state_->batches}; }
  void restore(const Position& position);

 private:
  bool accumulating() const { return in_accumulate_ && no_sync_depth_ == 0; }

  int steps_;
  std::shared_ptr<GradientState> state_;
  bool in_accumulate_ = false;
  int64_t window_ = 1;       // the open window's size
  int64_t micro_step_ = 0;   // the position within it, when no prepared loader sets it
  uint64_t batches_seen_ = 0;
  int no_sync_depth_ = 0;
};

}  // namespace accel
