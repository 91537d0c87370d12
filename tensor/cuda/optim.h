// CUDA twins of tensor/cpu/optim.h: the fused SGD and AdamW steps and the loss scaler's unscale, each
// one multi-tensor launch per dtype over the whole list (a table of pointers and sizes uploaded to the
// device), instead of a launch per tensor.
#pragma once

#include <vector>

#include "tensor/nograd/optim_ops.h"
#include "tensor/tensor.h"

namespace accel::cuda {

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const nograd::SgdConfig& config, bool first_step);
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const nograd::AdamWConfig& config, int64_t step);
// One pass over all grads that raises a device flag on inf/NaN; the flag is read back once (a
// synchronisation). Returns true when some element was inf or NaN.
bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale);

}  // namespace accel::cuda
