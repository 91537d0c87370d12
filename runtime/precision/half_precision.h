// HalfPrecision: compute in a 16-bit float (bf16, or f16 as Fp16Precision's base) under autocast,
// with copies of the f32 masters rounded once per step. bf16 keeps f32's range, so it needs nothing
// more: mixed_precision "bf16" is this class as it is. A prepared model's forward autocasts by itself.
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "runtime/precision/precision.h"

namespace accel {

class HalfPrecision : public Precision {
 public:
  // policy.compute is f16 or bf16.
  explicit HalfPrecision(const PrecisionPolicy& policy);
  ~HalfPrecision() override;

  std::string name() const override;
  const PrecisionPolicy& policy() const override { return policy_; }
  std::string describe() const override;
  AutocastGuard autocast() const override;
  // Also makes the model's forward run under autocast by itself, its low-precision outputs returned
  // as f32 (Accelerate's autocast and convert_outputs_to_fp32): the settings line's precision with
  // no scope in the loop.
  void prepare_model(nn::Module& model) override;
  void weights_changed() override { copies_->mark_stale(); }

 private:
  PrecisionPolicy policy_;
  // Owned here and handed to each autocast scope, which reads it.
  std::unique_ptr<WeightCopies> copies_;
  std::vector<HookHandle> model_hooks_;  // removed with this object: a model may outlive it
  std::unordered_set<const nn::Module*> autocast_models_;
};

}  // namespace accel
