// HalfPrecision: the policy check, autocast with the weight copies, and the masters' registration
// with the autocast scope of a prepared model's forward.
#include "runtime/precision/half_precision.h"

#include <fmt/format.h>

#include "autograd/functions.h"

namespace accel {

HalfPrecision::HalfPrecision(const PrecisionPolicy& policy)
    : policy_(policy), copies_(std::make_unique<WeightCopies>(policy.compute)) {
  if (policy_.compute != DType::f16 && policy_.compute != DType::bf16)
    throw Error(fmt::format("HalfPrecision: the compute dtype must be f16 or bf16, got {}", dtype_name(policy_.compute)));
}

std::string HalfPrecision::name() const { return policy_.compute == DType::f16 ? "fp16" : "bf16"; }

std::string HalfPrecision::describe() const { return policy_.describe() + ", no loss scaler"; }

AutocastGuard HalfPrecision::autocast() const { return AutocastGuard(policy_, copies_.get()); }

HalfPrecision::~HalfPrecision() {
  for (HookHandle& hook : model_hooks_) hook.remove();
}

namespace {
// An autocast scope held through a pointer, for a forward scope's token.
struct HeldAutocast {
  explicit HeldAutocast(const Precision& precision) : guard(precision.autocast()) {}
  AutocastGuard guard;
};
}  // namespace

void HalfPrecision::prepare_model(nn::Module& model) {
  for (const Tensor& p : model.parameters()) copies_->add(p);
  copies_->mark_stale();
  if (!autocast_models_.insert(&model).second) return;  // prepared again: its forward already autocasts
  model_hooks_.push_back(model.register_forward_scope(
      [this](nn::Module&, std::vector<std::shared_ptr<void>>& held) { held.push_back(std::make_shared<HeldAutocast>(*this)); }));
  model_hooks_.push_back(model.register_forward_hook([](nn::Module&, const Tensor&, Tensor& output) {
    if (output.defined() && kDTypeTraits[static_cast<size_t>(output.dtype())].is_low_precision)
      output = to_dtype(output, DType::f32);
  }));
}

}  // namespace accel
