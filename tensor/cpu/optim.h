// CPU fused optimizer updates and the loss scaler's unscale: one pass over each tensor's elements,
// in place; and the gradient norm's sum, one read of each.
#pragma once

#include <vector>

#include "tensor/nograd/optim_ops.h"
#include "tensor/tensor.h"

namespace accel::cpu {

// Inputs are checked by the entry points: all contiguous, matching shapes, state f32 (f64 for f64).
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const nograd::SgdConfig& config, bool first_step);
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const nograd::AdamWConfig& config, int64_t step);
// grads are contiguous and floating; returns true when some element was inf or NaN (before scaling).
bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale);
// grads are contiguous and floating; see nograd::grad_norm_power.
double grad_norm_power(const std::vector<Tensor>& grads, double norm_type);

}  // namespace accel::cpu
