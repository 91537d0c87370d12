// Precision: the numeric recipe of training. It owns autocast (the compute dtype of forward and loss,
// with low-precision copies of the f32 masters), the loss scaling in backward, unscale-and-check
// before a step, the skip decision all ranks agree on, and its state for checkpoints. FullPrecision,
// HalfPrecision (bf16), Fp16Precision and Fp8Precision (delayed scaling) are the recipes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/precision_policy.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace accel {

class LossScaler;

class Precision {
 public:
  virtual ~Precision() = default;
  Precision() = default;
  Precision(const Precision&) = delete;
  Precision& operator=(const Precision&) = delete;

  // The mixed_precision setting it implements: "no", "bf16", "fp16", "fp8".
  virtual std::string name() const = 0;
  virtual const PrecisionPolicy& policy() const = 0;
  // One line for the start-up print: the policy and the loss scaling.
  virtual std::string describe() const = 0;

  // The scope for forward and loss: matmuls in the compute dtype, reductions in f32.
  virtual AutocastGuard autocast() const = 0;
  // prepare: the model's parameters are masters whose low-precision copies autocast uses.
  virtual void prepare_model(nn::Module& model);
  // prepare: an optimizer. A recipe with one step-wide state (the fp16 scaler) may refuse a second.
  virtual void prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer);

  // backward: the loss the engine differentiates (fp16: times the loss scale, in f32).
  virtual Tensor scale_loss(const Tensor& loss) const;
  // Whether grads come out of backward multiplied by a scale (so clipping must wait for the
  // micro-step that updates).
  virtual bool scales_grads() const;
  // Before clip or step: unscales grads (at most once per step) and returns whether some rank's
  // grads held inf or NaN; every rank returns the same answer. grads: this rank's local grads of
  // every prepared optimizer. Collective when grads are scaled.
  virtual bool unscale_and_check(const std::vector<Tensor>& grads);
  // Ends a step after unscale_and_check: returns whether the optimizer may update (fp16 skips a step
  // with an overflow and adjusts its scale).
  virtual bool finish_step(bool found_inf);
  // The masters changed (a step, a load): low-precision copies are rounded again on next use.
  virtual void weights_changed();

  // The fp16 loss scaler; null for the other recipes.
  virtual LossScaler* loss_scaler();
  // The recipe's state for checkpoints (fp16: the scaler's; empty otherwise).
  virtual optim::StateDict state_dict() const;
  virtual void load_state_dict(const optim::StateDict& state);
};

// mixed_precision "no": everything in f32.
class FullPrecision final : public Precision {
 public:
  std::string name() const override { return "no"; }
  const PrecisionPolicy& policy() const override { return policy_; }
  std::string describe() const override;
  AutocastGuard autocast() const override { return AutocastGuard(policy_); }

 private:
  PrecisionPolicy policy_;
};

}  // namespace accel
