// The FP8 Linear of delayed scaling, emulated exactly on the CPU: forward quantises the input and the
// weight to e4m3 with their current scales and multiplies the dequantised values with f32 accumulation;
// backward quantises the output gradient to e5m2 (HYBRID) the same way. Each quantisation records its
// tensor's amax into its role's history, for the recipe's update at the optimizer step.
#pragma once

#include <array>
#include <memory>

#include "autograd/fp8/delayed_scaling.h"
#include "tensor/tensor.h"

namespace accel::fp8 {

// The scaling states of one Linear's three roles, indexed by Role; shared with its backward closures.
struct LinearScaling {
  std::array<ScalingState, kRoleCount> roles;
  explicit LinearScaling(int64_t history_len = 1024)
      : roles{ScalingState(history_len), ScalingState(history_len), ScalingState(history_len)} {}
  ScalingState& operator[](Role role) { return roles[static_cast<size_t>(role)]; }
};

// t cast to the fp8 dtype after multiplying by state.scale, then back to f32 times 1 / scale (TE's
// scale_inv): the values an FP8 GEMM reads. Records max |t| (NaN as +inf) into state first. No graph.
Tensor quantize_dequantize(const Tensor& t, ScalingState& state, DType fp8_dtype);

// y = x W^T + b with x and W through quantize_dequantize (e4m3) and the output in out_dtype (f32 or
// bf16); differentiable in x, weight and bias. The grads of x and W use the e5m2 (HYBRID) or e4m3
// quantised output grad; the bias grad uses the output grad as it came.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::shared_ptr<LinearScaling>& scaling,
              const RecipeOptions& options, DType out_dtype = DType::f32);

}  // namespace accel::fp8
