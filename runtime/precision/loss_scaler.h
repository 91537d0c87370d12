// LossScaler: the dynamic loss scale of fp16 training. backward multiplies the loss by scale(); before
// the step the grads are unscaled and checked for inf/NaN in one fused pass; a step with an overflow
// is skipped and the scale shrinks, and after growth_interval clean steps in a row the scale grows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace accel {

struct LossScalerOptions {
  double init_scale = 65536.0;    // 2^16
  double growth_factor = 2.0;     // after growth_interval clean steps in a row
  double backoff_factor = 0.5;    // after a step with inf/NaN grads
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  // Throws when an option is out of range (init_scale a normal positive f32, growth_factor > 1,
  // backoff_factor in (0, 1), growth_interval >= 1).
  explicit LossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  const LossScalerOptions& options() const { return options_; }
  // Multiplies every grad by 1 / scale() in place; returns true when some grad held inf or NaN. One
  // fused pass (nograd::unscale_and_check_); grads that are not contiguous are unscaled through a copy.
  bool unscale(const std::vector<Tensor>& grads) const;
  // Ends one step: found_inf (agreed by every rank) skips it and shrinks the scale; otherwise counts a
  // clean step and grows the scale after growth_interval of them. The scale stays within the normal
  // f32 range, so the scaled loss and 1 / scale never become 0 or inf.
  void update(bool found_inf);

  int64_t clean_steps() const { return clean_steps_; }      // clean steps since the last change of scale
  int64_t skipped_steps() const { return skipped_steps_; }  // over the whole run
  // "loss scale 32768, 3 skipped steps", for the main process's log.
  std::string describe() const;

  // "scale" (0-d f64), "clean_steps" and "skipped_steps" (0-d i64): part of the saved training state.
  optim::StateDict state_dict() const;
  // Throws one Error naming the missing keys, and then changes nothing.
  void load_state_dict(const optim::StateDict& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace accel
