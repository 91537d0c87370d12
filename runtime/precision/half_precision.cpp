// HalfPrecision: the policy check, autocast with the weight copies, and the masters' registration.
#include "runtime/precision/half_precision.h"

#include <fmt/format.h>

namespace accel {

HalfPrecision::HalfPrecision(const PrecisionPolicy& policy)
    : policy_(policy), copies_(std::make_unique<WeightCopies>(policy.compute)) {
  if (policy_.compute != DType::f16 && policy_.compute != DType::bf16)
    throw Error(fmt::format("HalfPrecision: the compute dtype must be f16 or bf16, got {}", dtype_name(policy_.compute)));
}

std::string HalfPrecision::name() const { return policy_.compute == DType::f16 ? "fp16" : "bf16"; }

std::string HalfPrecision::describe() const { return policy_.describe() + ", no loss scaler"; }

AutocastGuard HalfPrecision::autocast() const { return AutocastGuard(policy_, copies_.get()); }

void HalfPrecision::prepare_model(nn::Module& model) {
  for (const Tensor& p : model.parameters()) copies_->add(p);
  copies_->mark_stale();
}

}  // namespace accel
