// The FP8 Linear's forward and backward. On the CPU on dequantised values: quantise, then a plain f32
// GEMM, so the result equals an FP8 GEMM with f32 accumulation up to the order of the sum. On a CUDA
// device that runs FP8 GEMMs (sm_89+), with every dim a multiple of 16, the three GEMMs are cuBLASLt's
// FP8 GEMM on the quantised bytes (tensor/nograd/fp8_gemm.h); elsewhere on CUDA, the same emulation.
#include "autograd/fp8/fp8_linear.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "kernels/error.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/fp8_gemm.h"
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

namespace {

// t quantised with its role's scale, its amax recorded (the CUDA path's quantize_dequantize).
nograd::Fp8Tensor quantize(const Tensor& t, ScalingState& state, DType fp8_dtype) {
  float amax = 0.0f;
  nograd::Fp8Tensor q = nograd::quantize_fp8(t, state.scale, fp8_dtype, &amax);
  state.record(amax);
  return q;
}

// q^T as a contiguous fp8 tensor with q's scale: the FP8 GEMM reads both operands K-contiguous.
nograd::Fp8Tensor transposed(const nograd::Fp8Tensor& q) {
  return {nograd::contiguous(nograd::transpose(q.data, 0, 1)), q.scale, q.scale_inv};
}

// Well-formed operands on a device and of a shape the FP8 GEMM takes; anything else goes to the
// emulation, whose checks name what is wrong.
bool use_fp8_gemm(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.defined() || !weight.defined() || weight.dim() != 2 || x.dim() < 1 || weight.size(1) == 0 ||
      x.size(-1) != weight.size(1) || x.device() != weight.device() || (bias.defined() && bias.device() != x.device()))
    return false;
  return nograd::fp8_gemm_on_device(x.device(), x.numel() / weight.size(1), weight.size(0), weight.size(1));
}

// The Linear on FP8 GEMMs: y = x W^T + b; dx = g W; dW = g^T x. The saved x and W are the fp8 bytes.
Tensor linear_on_fp8_gemm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const std::shared_ptr<LinearScaling>& scaling, const RecipeOptions& options, DType out_dtype) {
  const int64_t in = weight.size(1), out_features = weight.size(0);
  const nograd::Fp8Tensor xq = quantize(nograd::reshape(x, {-1, in}), (*scaling)[Role::input], options.dtype_of(Role::input));
  const nograd::Fp8Tensor wq = quantize(weight, (*scaling)[Role::weight], options.dtype_of(Role::weight));
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  const Tensor out = nograd::reshape(nograd::fp8_gemm(xq, wq, bias, out_dtype), out_shape);
  autograd::record("Fp8LinearBackward", {x, weight, bias}, {out},
                   [xq, wq, scaling, grad_dtype = options.dtype_of(Role::grad_output), x_shape = x.shape(),
                    x_dtype = x.dtype(), w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : DType::f32,
                    need_x = x.requires_grad(), need_w = weight.requires_grad(),
                    need_b = bias.defined() && bias.requires_grad()](const Grads& g) -> Grads {
                     const int64_t n_out = wq.data.size(0);
                     const Tensor g2 = nograd::reshape(nograd::to_dtype(g[0], DType::f32), {-1, n_out});
                     const nograd::Fp8Tensor gq = quantize(g2, (*scaling)[Role::grad_output], grad_dtype);
                     Tensor gx, gw, gb;
                     if (need_x)
                       gx = nograd::to_dtype(nograd::reshape(nograd::fp8_gemm(gq, transposed(wq), {}, DType::f32), x_shape),
                                             x_dtype);
                     if (need_w)
                       gw = nograd::to_dtype(nograd::fp8_gemm(transposed(gq), transposed(xq), {}, DType::f32), w_dtype);
                     if (need_b) gb = nograd::to_dtype(nograd::sum(g2, {0}), b_dtype);
                     return {gx, gw, gb};
                   });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::shared_ptr<LinearScaling>& scaling,
              const RecipeOptions& options, DType out_dtype) {
  if (!scaling) throw Error("fp8::linear: no scaling state");
  if (out_dtype != DType::f32 && out_dtype != DType::bf16)
    throw Error(fmt::format("fp8::linear: output dtype {}, expected f32 or bf16", dtype_name(out_dtype)));
  if (use_fp8_gemm(x, weight, bias))
    return linear_on_fp8_gemm(x, weight, bias, scaling, options, out_dtype);
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
