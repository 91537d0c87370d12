// Fp16Precision: the scaled loss, the once-per-step unscale with its agreed overflow flag, and the
// scaler's update at the end of each step.
#include "runtime/precision/fp16_precision.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/creation.h"

namespace accel {

Fp16Precision::Fp16Precision(const PrecisionPolicy& policy, const LossScalerOptions& scaler, Communicator* comm)
    : HalfPrecision(policy), scaler_(scaler), comm_(comm) {}

std::string Fp16Precision::describe() const {
  const LossScalerOptions& o = scaler_.options();
  return fmt::format("{}, dynamic loss scale {} (x{} after {} clean steps, x{} on overflow)", policy().describe(),
                     o.init_scale, o.growth_factor, o.growth_interval, o.backoff_factor);
}

void Fp16Precision::prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) {
  for (const auto& weak : optimizers_)
    if (!weak.expired())
      throw Error("Accelerator::prepare: with mixed_precision=fp16 one optimizer can be prepared (the loss scaler "
                  "unscales, checks and updates once per step); this is a second one");
  optimizers_.push_back(optimizer);
}

Tensor Fp16Precision::scale_loss(const Tensor& loss) const {
  // In f32, so that the scale itself cannot overflow; the step unscales the grads.
  return to(loss, DType::f32) * scaler_.scale();
}

bool Fp16Precision::unscale_and_check(const std::vector<Tensor>& grads) {
  if (unscaled_) return found_inf_;
  NoGradGuard no_grad;
  bool found_inf = scaler_.unscale(grads);
  if (comm_) {
    // One all-reduce of a flag: if any rank overflowed, every rank skips this step.
    Tensor flag = full({1}, found_inf ? 1.0 : 0.0, DType::f32, comm_->device());
    comm_->all_reduce(flag, ReduceOp::max, "fp16 overflow flag");
    found_inf = flag.item() != 0.0;
  }
  found_inf_ = found_inf;
  unscaled_ = true;
  return found_inf;
}

bool Fp16Precision::finish_step(bool found_inf) {
  unscaled_ = false;
  found_inf_ = false;
  scaler_.update(found_inf);
  return !found_inf;
}

}  // namespace accel
