// Fp16Precision: HalfPrecision in f16 plus the dynamic loss scaler. f16's 5 exponent bits flush small
// grads to zero, so backward runs on loss * scale; before the step the grads are unscaled and checked
// in one pass, every rank learns whether any rank overflowed, and such a step is skipped everywhere.
#pragma once

#include <memory>
#include <vector>

#include "collective/communicator.h"
#include "runtime/precision/half_precision.h"
#include "runtime/precision/loss_scaler.h"

namespace accel {

class Fp16Precision final : public HalfPrecision {
 public:
  // comm agrees on overflows across the ranks; null with one process.
  Fp16Precision(const PrecisionPolicy& policy, const LossScalerOptions& scaler, Communicator* comm);

  std::string describe() const override;
  void prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) override;
  Tensor scale_loss(const Tensor& loss) const override;
  bool scales_grads() const override { return true; }
  bool unscale_and_check(const std::vector<Tensor>& grads) override;
  bool finish_step(bool found_inf) override;
  LossScaler* loss_scaler() override { return &scaler_; }
  optim::StateDict state_dict() const override { return scaler_.state_dict(); }
  void load_state_dict(const optim::StateDict& state) override { scaler_.load_state_dict(state); }

 private:
  LossScaler scaler_;
  Communicator* comm_;
  std::vector<std::weak_ptr<optim::Optimizer>> optimizers_;
  bool unscaled_ = false;   // this step's grads were unscaled already (by clip_grad_norm)
  bool found_inf_ = false;  // ... and some rank's held inf or NaN
};

}  // namespace accel
