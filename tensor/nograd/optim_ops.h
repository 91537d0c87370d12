// Raw fused optimizer updates over lists of tensors, in place, the loss scaler's unscale step and the
// gradient norm's sum; one pass per tensor on the CPU and one multi-tensor launch on CUDA.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel::nograd {

struct SgdConfig {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};
// momentum_buffers may be empty when momentum is 0; first_step fills them with the gradient.
void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const SgdConfig& config, bool first_step);

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};
// step counts from 1 (for bias correction). exp_avg/exp_avg_sq are f32 (or f64 for f64 params).
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const AdamWConfig& config, int64_t step);

// The loss scaler's unscale: multiplies every grad by inv_scale in place and returns true when some
// element was inf or NaN (checked before the multiply). grads are floating, contiguous and on one
// device; on CUDA one pass over all of them writes a device flag that is read back once.
bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale);

// The sum over every element of grads of |g|^norm_type (for norm_type = inf the largest |g|), in f64:
// clip_grad_norm's norm before the root. NaN propagates. On the CPU each grad is read once, summed in
// blocks whose order depends on its size only (so never on the thread count); elsewhere it composes
// the raw ops. Grads are floating, of any dtype, on one device; norm_type is > 0 or inf.
double grad_norm_power(const std::vector<Tensor>& grads, double norm_type);

}  // namespace accel::nograd
