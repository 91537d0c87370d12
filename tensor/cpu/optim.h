// CPU fused optimizer updates: one pass over each parameter's elements, in place.
#pragma once

#include <vector>

#include "tensor/ops/optim_ops.h"
#include "tensor/tensor.h"

namespace accel::cpu {

// Inputs are checked by the entry points: all contiguous, matching shapes, state f32 (f64 for f64).
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const ops::SgdConfig& config, bool first_step);
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const ops::AdamWConfig& config, int64_t step);
// Multiplies each grad by inv_scale in place and clears `finite` if some element was inf or NaN.
void unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale, bool& finite);

}  // namespace accel::cpu
