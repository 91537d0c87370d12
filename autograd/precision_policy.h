// PrecisionPolicy: which dtype each part of mixed-precision training uses (master weights, compute,
// reductions, gradient communication). The Accelerator builds it from its settings; autocast reads it.
#pragma once

#include <string>

#include "autograd/mixed_precision.h"
#include "tensor/dtype.h"

namespace accel {

struct PrecisionPolicy {
  DType param = DType::f32;      // master weights and the optimizer's update
  DType compute = DType::f32;    // matmuls, linear, attention, activations between them
  DType reduction = DType::f32;  // norms, softmax, losses, long sums
  DType grad_comm = DType::f32;  // the dtype gradients are all-reduced in

  // The policy of a mixed_precision setting (no, fp16, bf16, or fp8, whose compute outside its FP8
  // Linears is bf16) with grad_comm
  // f32 (the default), compute (the compute dtype) or a dtype that must then be the compute dtype.
  // Throws, naming both settings, when they contradict each other (mixed_precision=bf16 with f16).
  static PrecisionPolicy from_settings(MixedPrecision mixed_precision, GradCommDType grad_comm = GradCommDType::f32);
  // The same from the names users type ("fp32" and "fp16" are accepted for grad_comm too).
  static PrecisionPolicy from_settings(const std::string& mixed_precision, const std::string& grad_comm = "f32");

  // Throws when the dtypes break the policy's rules: param and reduction f32, compute f32/f16/bf16,
  // grad_comm f32 or the compute dtype.
  void validate() const;
  // True when compute differs from param, i.e. autocast has something to do.
  bool is_mixed() const { return compute != param; }
  // One line, e.g. "param f32, compute bf16, reduction f32, grad_comm f32".
  std::string describe() const;
};

}  // namespace accel
