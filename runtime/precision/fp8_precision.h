// Fp8Precision: mixed_precision "fp8", Transformer Engine's delayed scaling. Every nn::Linear of a
// prepared model but the first and the last (unless the recipe includes them) multiplies in FP8
// (fp8::linear, with its own scaling state); the rest of the model computes in bf16 under autocast
// with f32 masters, as HalfPrecision does. Once per optimizer step the ranks agree on the step's amaxes
// in one max all-reduce, and every scale is updated from its history.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/fp8/delayed_scaling.h"
#include "autograd/fp8/fp8_linear.h"
#include "collective/communicator.h"
#include "nn/linear.h"
#include "runtime/precision/half_precision.h"

namespace accel {

class Fp8Precision final : public HalfPrecision {
 public:
  // policy.compute is bf16 (the non-Linear compute); recipe is validated here. comm reduces the amaxes
  // across the ranks; null with one process.
  Fp8Precision(const PrecisionPolicy& policy, const fp8::RecipeOptions& recipe, Communicator* comm);

  std::string name() const override { return "fp8"; }
  std::string describe() const override;
  const fp8::RecipeOptions& recipe() const { return recipe_; }
  // Switches the model's Linears (all, or all but the first and the last in module order) to FP8. A
  // model left with none is an accel::Error naming the model and the rule. A model prepared again is
  // left as it is.
  void prepare_model(nn::Module& model) override;
  // One optimizer: the amaxes are reduced and the scales updated once per step.
  void prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) override;
  // The step's amax all-reduce (with several ranks) and every ScalingState's update.
  bool finish_step(bool found_inf) override;

  // "<linear>.<role>.amax_history" (f32 [history_len]) and "<linear>.<role>.scale" (f32 [1]) for each
  // FP8 Linear, the Linear named as in the checkpoint's model files ("model_<i>." before the i-th
  // model's names after the first), role input, weight or grad_output.
  optim::StateDict state_dict() const override;
  // Throws, naming both sides, when the state's Linears or history length differ from this run's;
  // then changes nothing.
  void load_state_dict(const optim::StateDict& state) override;

  // The FP8 Linears' names in preparation and module order, and the scaling state of one of them.
  std::vector<std::string> fp8_linear_names() const;
  const fp8::LinearScaling& scaling(const std::string& linear_name) const;

 private:
  struct Fp8Linear {
    std::string name;  // the Linear's module path, after "model_<i>." from the second model on
    std::shared_ptr<fp8::LinearScaling> scaling;
  };
  fp8::RecipeOptions recipe_;
  Communicator* comm_;
  std::vector<Fp8Linear> linears_;
  std::unordered_set<const nn::Module*> fp8_models_;
  int prepared_models_ = 0;  // names the next model's Linears, as the checkpoint names parameters
  std::vector<std::weak_ptr<optim::Optimizer>> optimizers_;
};

// Throws unless device can run the FP8 GEMMs (a CUDA device of compute capability 8.9 or more) or the
// user allowed emulation there (fp8 emulation, ACCEL_FP8_EMULATION=1). The CPU is the emulation itself.
void check_fp8_device(Device device, bool allow_emulation);

}  // namespace accel
