// Fused causal attention's entry points: check the operands once, widen halves to f32 and hand
// [B, T, H, D] operands with a unit last stride to the CPU kernel.
#include "tensor/nograd/attention.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <utility>

#include "tensor/cpu/attention.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel::nograd {

namespace {

// Checks that every named operand is a defined [B, T, H, D] CPU tensor of q's floating dtype and shape.
void check_operands(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands,
                    double scale) {
  const Tensor& first = *operands.begin()->second;
  for (const auto& [name, t] : operands) {
    if (!t->defined()) throw Error(fmt::format("{}: {} is undefined", op, name));
    if (t->dim() != 4)
      throw Error(fmt::format("{}: {} must be [B, T, H, D], got {}", op, name, shape_str(t->shape())));
    if (!is_floating(t->dtype()) || is_float8(t->dtype()))
      throw Error(fmt::format("{}: {} has dtype {}; expected f64, f32, f16 or bf16", op, name,
                              dtype_name(t->dtype())));
    if (!t->device().is_cpu())
      throw Error(fmt::format("{}: {} is on {}; the fused kernel runs on the CPU (nn's attention composes "
                              "matmul and causal_softmax elsewhere)",
                              op, name, t->device().str()));
    if (t->dtype() != first.dtype() || t->shape() != first.shape())
      throw Error(fmt::format("{}: {} is {} {}, but {} is {} {}", op, name, dtype_name(t->dtype()),
                              shape_str(t->shape()), operands.begin()->first, dtype_name(first.dtype()),
                              shape_str(first.shape())));
  }
  if (!std::isfinite(scale)) throw Error(fmt::format("{}: scale must be finite, got {}", op, scale));
}

// t in the kernel's compute dtype with a unit last stride: halves widened to f32, others as they are.
Tensor kernel_operand(const Tensor& t) {
  if (is_low_precision(t.dtype())) return to_dtype(t, DType::f32);
  return t.stride(3) == 1 || t.size(3) <= 1 ? t : contiguous(t);
}

// A result computed in f32, in the caller's dtype.
Tensor in_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : to_dtype(t, dtype); }

}  // namespace

CausalAttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  check_operands("causal_attention", {{"q", &q}, {"k", &k}, {"v", &v}}, scale);
  const DType compute = compute_dtype(q.dtype());
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2);
  Tensor out = empty(q.shape(), compute, q.device());
  Tensor lse = empty({B, H, T}, compute, q.device());
  if (out.numel() > 0) cpu::causal_attention(out, lse, kernel_operand(q), kernel_operand(k), kernel_operand(v), scale);
  return {in_dtype(out, q.dtype()), lse};
}

CausalAttentionGrads causal_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const Tensor& out, const Tensor& lse, double scale) {
  const char* op = "causal_attention_backward";
  check_operands(op, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"grad_out", &grad_out}}, scale);
  const DType compute = compute_dtype(q.dtype());
  const Shape lse_shape{q.size(0), q.size(2), q.size(1)};
  if (!lse.defined() || lse.shape() != lse_shape || lse.dtype() != compute || !lse.is_contiguous())
    throw Error(fmt::format("{}: lse must be the forward's contiguous {} {}, got {}", op, dtype_name(compute),
                            shape_str(lse_shape), lse.defined() ? std::string(dtype_name(lse.dtype())) + " " + shape_str(lse.shape())
                                                                : std::string("undefined")));
  Tensor gq = empty(q.shape(), compute, q.device()), gk = empty(q.shape(), compute, q.device()),
         gv = empty(q.shape(), compute, q.device());
  if (gq.numel() > 0)
    cpu::causal_attention_backward(gq, gk, gv, kernel_operand(grad_out), kernel_operand(q), kernel_operand(k),
                                   kernel_operand(v), kernel_operand(out), lse, scale);
  return {in_dtype(gq, q.dtype()), in_dtype(gk, q.dtype()), in_dtype(gv, q.dtype())};
}

}  // namespace accel::nograd
