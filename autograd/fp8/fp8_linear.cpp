// The FP8 Linear's forward and backward on dequantised values: quantise, then a plain f32 GEMM, so the
// result equals an FP8 GEMM with f32 accumulation up to the order of the sum.
#include "autograd/fp8/fp8_linear.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "kernels/error.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel::fp8 {

using Grads = std::vector<Tensor>;

Tensor quantize_dequantize(const Tensor& t, ScalingState& state, DType fp8_dtype) {
  if (!is_float8(fp8_dtype))
    throw Error(fmt::format("fp8::quantize_dequantize: dtype {} is not an fp8 dtype", dtype_name(fp8_dtype)));
  const Tensor wide = nograd::to_dtype(t, DType::f32);
  const float amax = t.numel() == 0 ? 0.0f : static_cast<float>(nograd::max(nograd::abs(wide)).item());
  state.record(amax);
  const Tensor narrow = nograd::to_dtype(nograd::mul(wide, static_cast<double>(state.scale)), fp8_dtype);
  return nograd::mul(nograd::to_dtype(narrow, DType::f32), static_cast<double>(1.0f / state.scale));
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::shared_ptr<LinearScaling>& scaling,
              const RecipeOptions& options, DType out_dtype) {
  if (!scaling) throw Error("fp8::linear: no scaling state");
  if (out_dtype != DType::f32 && out_dtype != DType::bf16)
    throw Error(fmt::format("fp8::linear: output dtype {}, expected f32 or bf16", dtype_name(out_dtype)));
  const Tensor xq = quantize_dequantize(x, (*scaling)[Role::input], options.dtype_of(Role::input));
  const Tensor wq = quantize_dequantize(weight, (*scaling)[Role::weight], options.dtype_of(Role::weight));
  const Tensor b = bias.defined() ? nograd::to_dtype(bias, DType::f32) : bias;
  const Tensor out = nograd::to_dtype(nograd::linear(xq, wq, b), out_dtype);
  autograd::record("Fp8LinearBackward", {x, weight, bias}, {out},
                   [xq, wq, scaling, grad_dtype = options.dtype_of(Role::grad_output), x_shape = x.shape(),
                    x_dtype = x.dtype(), w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : DType::f32,
                    need_x = x.requires_grad(), need_w = weight.requires_grad(),
                    need_b = bias.defined() && bias.requires_grad()](const Grads& g) -> Grads {
                     const int64_t in = wq.size(1), out_features = wq.size(0);
                     const Tensor g2 = nograd::reshape(nograd::to_dtype(g[0], DType::f32), {-1, out_features});
                     const Tensor gq = quantize_dequantize(g2, (*scaling)[Role::grad_output], grad_dtype);
                     Tensor gx, gw, gb;
                     if (need_x) gx = nograd::to_dtype(nograd::reshape(nograd::matmul(gq, wq), x_shape), x_dtype);
                     if (need_w)
                       gw = nograd::to_dtype(
                           nograd::matmul(nograd::transpose(gq, 0, 1), nograd::reshape(xq, {-1, in})), w_dtype);
                     if (need_b) gb = nograd::to_dtype(nograd::sum(g2, {0}), b_dtype);
                     return {gx, gw, gb};
                   });
  return out;
}

}  // namespace accel::fp8
