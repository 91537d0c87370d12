// PrecisionPolicy: building it from the user's settings and rejecting contradictory ones.
#include "autograd/precision_policy.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace accel {

PrecisionPolicy PrecisionPolicy::from_settings(MixedPrecision mixed_precision, GradCommDType grad_comm) {
  PrecisionPolicy p;
  switch (mixed_precision) {
    case MixedPrecision::no: break;
    case MixedPrecision::fp16: p.compute = DType::f16; break;
    case MixedPrecision::bf16: p.compute = DType::bf16; break;
    case MixedPrecision::fp8: p.compute = DType::bf16; break;  // around the FP8 Linears: Fp8Precision
    default:
      throw Error(fmt::format("PrecisionPolicy: mixed_precision '{}' is not valid; expected {}", name_of(mixed_precision),
                              available_choices(kMixedPrecisionNames)));
  }
  if (grad_comm == GradCommDType::f32) {
    p.grad_comm = DType::f32;
  } else if (grad_comm == GradCommDType::compute) {
    p.grad_comm = p.compute;
  } else {
    const DType asked = grad_comm == GradCommDType::bf16 ? DType::bf16 : DType::f16;
    if (asked != p.compute)
      throw Error(fmt::format("PrecisionPolicy: grad_comm_dtype={} conflicts with mixed_precision={}: gradients are "
                              "communicated in f32 or in the compute dtype ({}); use f32 or compute",
                              name_of(grad_comm), name_of(mixed_precision), dtype_name(p.compute)));
    p.grad_comm = asked;
  }
  p.validate();
  return p;
}

PrecisionPolicy PrecisionPolicy::from_settings(const std::string& mixed_precision, const std::string& grad_comm) {
  const std::optional<MixedPrecision> mp = value_in(kMixedPrecisionNames, mixed_precision);
  if (!mp)
    throw Error(fmt::format("PrecisionPolicy: mixed_precision '{}' is not valid; expected {}", mixed_precision,
                            available_choices(kMixedPrecisionNames)));
  const std::string comm = grad_comm == "fp32" ? "f32" : grad_comm == "fp16" ? "f16" : grad_comm;
  const std::optional<GradCommDType> gc = value_in(kGradCommDTypeNames, comm);
  if (!gc)
    throw Error(fmt::format("PrecisionPolicy: grad_comm_dtype '{}' is not valid; expected {}", grad_comm,
                            available_choices(kGradCommDTypeNames)));
  return from_settings(*mp, *gc);
}

void PrecisionPolicy::validate() const {
  if (param != DType::f32)
    throw Error(fmt::format("PrecisionPolicy: param dtype {} is not supported; master weights are f32",
                            dtype_name(param)));
  if (reduction != DType::f32)
    throw Error(fmt::format("PrecisionPolicy: reduction dtype {} is not supported; reductions run in f32",
                            dtype_name(reduction)));
  if (compute != DType::f32 && compute != DType::f16 && compute != DType::bf16)
    throw Error(fmt::format("PrecisionPolicy: compute dtype {} is not supported; expected f32, f16 or bf16",
                            dtype_name(compute)));
  if (grad_comm != DType::f32 && grad_comm != compute)
    throw Error(fmt::format("PrecisionPolicy: grad_comm dtype {} conflicts with compute dtype {}; gradients are "
                            "communicated in f32 or in the compute dtype",
                            dtype_name(grad_comm), dtype_name(compute)));
}

std::string PrecisionPolicy::describe() const {
  return fmt::format("param {}, compute {}, reduction {}, grad_comm {}", dtype_name(param), dtype_name(compute),
                     dtype_name(reduction), dtype_name(grad_comm));
}

}  // namespace accel
