// Raw neural-network op entry points: check shapes, dtypes and devices once, make the operands
// contiguous, allocate the outputs and dispatch to the CPU or CUDA implementation.
#include "tensor/nograd/nn_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/philox.h"
#include "tensor/cpu/cross_entropy.h"
#include "tensor/cpu/dropout.h"
#include "tensor/cpu/embedding.h"
#include "tensor/cpu/layer_norm.h"
#include "tensor/cpu/softmax.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/cross_entropy_by_ops.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/cross_entropy.h"
#include "tensor/cuda/dropout.h"
#include "tensor/cuda/embedding.h"
#include "tensor/cuda/layer_norm.h"
#include "tensor/cuda/softmax.h"
#endif

namespace accel::nograd {

namespace {

constexpr const char* kFloating = "a floating dtype (f64, f32, f16, bf16)";

void check_defined(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) throw Error(fmt::format("{}: {} is undefined", op, name));
}

void check_floating(const char* op, const Tensor& t) {
  if (!is_floating(t.dtype())) throw_unsupported_dtype(op, t.dtype(), kFloating);
}

void check_index_dtype(const char* op, const Tensor& t, const char* name) {
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32)
    throw Error(fmt::format("{}: {} must be i64 or i32, got {}", op, name, dtype_name(t.dtype())));
}

void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  if (a.device() != b.device())
    throw Error(fmt::format("{}: {} is on {} but {} is on {}", op, a_name, a.device().str(), b_name, b.device().str()));
}

void check_same_dtype(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  if (a.dtype() != b.dtype())
    throw Error(fmt::format("{}: {} is {} but {} is {}; they must match", op, a_name, dtype_name(a.dtype()), b_name,
                            dtype_name(b.dtype())));
}

void check_shape(const char* op, const Tensor& t, const char* name, const Shape& expected, const char* why) {
  if (t.shape() != expected)
    throw Error(fmt::format("{}: {} has shape {}, expected {}{}", op, name, shape_str(t.shape()),
                            shape_str(expected), why));
}

// Layer-norm statistics and the cross-entropy loss are f64 for f64 inputs, else f32.
DType stats_dtype(DType dtype) { return compute_dtype(dtype); }

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
  }
  return "?";
}

// [outer, size, inner] around dim d (a 0-d tensor is one element).
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at(const Shape& shape, int64_t d) {
  DimSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < d) s.outer *= shape[i];
    else if (i == d) s.size = shape[i];
    else s.inner *= shape[i];
  }
  return s;
}

Tensor softmax_forward(const char* op, const Tensor& x, int64_t dim, bool is_log) {
  check_defined(op, x, "x");
  check_floating(op, x);
  const DimSplit s = split_at(x.shape(), normalize_dim(op, dim, x.dim()));
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  ACCEL_DISPATCH(op, x.device(), softmax, out, contiguous(x), s.outer, s.size, s.inner, is_log);
  return out;
}

Tensor softmax_backward_impl(const char* op, const Tensor& grad_out, const Tensor& out, int64_t dim, bool is_log) {
  check_defined(op, grad_out, "grad_out");
  check_defined(op, out, "out");
  check_floating(op, out);
  check_same_dtype(op, grad_out, "grad_out", out, "out");
  check_same_device(op, grad_out, "grad_out", out, "out");
  if (grad_out.shape() != out.shape())
    throw Error(fmt::format("{}: grad_out {} and out {} differ in shape", op, shape_str(grad_out.shape()),
                            shape_str(out.shape())));
  const DimSplit s = split_at(out.shape(), normalize_dim(op, dim, out.dim()));
  Tensor grad_in = empty(out.shape(), out.dtype(), out.device());
  ACCEL_DISPATCH(op, out.device(), softmax_backward, grad_in, contiguous(grad_out), contiguous(out), s.outer, s.size,
                 s.inner, is_log);
  return grad_in;
}

// weight / bias of layer norm: undefined, or [dim] with x's dtype and device.
void check_affine(const char* op, const Tensor& p, const char* name, const Tensor& x) {
  if (!p.defined()) return;
  if (p.shape() != Shape{x.shape().back()})
    throw Error(fmt::format("{}: {} has shape {}, expected [{}] (the last dim of x {})", op, name,
                            shape_str(p.shape()), x.shape().back(), shape_str(x.shape())));
  check_same_dtype(op, p, name, x, "x");
  check_same_device(op, p, name, x, "x");
}

void check_layer_norm_input(const char* op, const Tensor& x) {
  check_defined(op, x, "x");
  check_floating(op, x);
  if (x.dim() == 0) throw Error(fmt::format("{}: x must have at least one dim, got a 0-d tensor", op));
  if (x.shape().back() == 0)
    throw Error(fmt::format("{}: the last dim of x {} is empty; there is nothing to normalise", op,
                            shape_str(x.shape())));
}

Shape without_last(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }

// logits [N, C] with C > 0 and target [N] of an index dtype on the same device.
void check_cross_entropy_inputs(const char* op, const Tensor& logits, const Tensor& target) {
  check_defined(op, logits, "logits");
  check_defined(op, target, "target");
  check_floating(op, logits);
  if (logits.dim() != 2)
    throw Error(fmt::format("{}: logits must be 2-d [N, C], got {}", op, shape_str(logits.shape())));
  if (logits.shape()[1] == 0)
    throw Error(fmt::format("{}: logits {} have no classes", op, shape_str(logits.shape())));
  check_index_dtype(op, target, "target");
  if (target.shape() != Shape{logits.shape()[0]})
    throw Error(fmt::format("{}: target has shape {}, expected [{}] (one class per row of logits {})", op,
                            shape_str(target.shape()), logits.shape()[0], shape_str(logits.shape())));
  check_same_device(op, target, "target", logits, "logits");
}

// label_smoothing in [0, 1]; weight undefined or [C] of a floating dtype on the logits' device.
void check_cross_entropy_options(const char* op, const Tensor& logits, const CrossEntropyOptions& options) {
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0))
    throw Error(fmt::format("{}: label_smoothing must be in [0, 1], got {}", op, options.label_smoothing));
  const Tensor& w = options.weight;
  if (!w.defined()) return;
  if (!is_floating(w.dtype()))
    throw Error(fmt::format("{}: weight is {}, expected {}", op, dtype_name(w.dtype()), kFloating));
  if (w.shape() != Shape{logits.shape()[1]})
    throw Error(fmt::format("{}: weight has shape {}, expected [{}] (one per class of logits {})", op,
                            shape_str(w.shape()), logits.shape()[1], shape_str(logits.shape())));
  check_same_device(op, w, "weight", logits, "logits");
}

// Without weight or smoothing the loss is the plain one, which every device has a fused kernel for.
bool is_plain(const CrossEntropyOptions& options) {
  return !options.weight.defined() && options.label_smoothing == 0.0;
}

// The options as the CPU loops read them: the weight contiguous, in the loss dtype.
CrossEntropyOptions cpu_options(const Tensor& logits, CrossEntropyOptions options) {
  if (options.weight.defined()) options.weight = contiguous(to_dtype(options.weight, stats_dtype(logits.dtype())));
  return options;
}

Shape loss_shape(const Tensor& logits, Reduction reduction) {
  return reduction == Reduction::none ? Shape{logits.shape()[0]} : Shape{};
}

// [Tq, Tk] of x's last two dims, after the checks causal_softmax and its backward share.
std::pair<int64_t, int64_t> causal_dims(const char* op, const Tensor& t, const char* name, double scale) {
  check_defined(op, t, name);
  check_floating(op, t);
  if (t.dim() < 2)
    throw Error(fmt::format("{}: {} must be [..., Tq, Tk] with at least 2 dims, got {}", op, name,
                            shape_str(t.shape())));
  const int64_t tq = t.size(-2), tk = t.size(-1);
  if (tq > tk)
    throw Error(fmt::format("{}: {} {} has more queries ({}) than keys ({}); the first rows would see nothing", op,
                            name, shape_str(t.shape()), tq, tk));
  if (!std::isfinite(scale)) throw Error(fmt::format("{}: scale must be finite, got {}", op, scale));
  return {tq, tk};
}

// The positions row i of a [Tq, Tk] score matrix must not see: j > i + Tk - Tq.
Tensor future_mask(int64_t tq, int64_t tk, Device device) {
  const Tensor keys = view(arange(tk, DType::i64, device), {1, tk});
  const Tensor last_seen = view(arange(static_cast<double>(tk - tq), static_cast<double>(tk), 1.0, DType::i64, device),
                                {tq, 1});
  return gt(keys, last_seen);
}

}  // namespace

Tensor causal_softmax(const Tensor& x, double scale) {
  const auto [tq, tk] = causal_dims("causal_softmax", x, "x", scale);
  if (!x.device().is_cpu())  // no fused kernel there yet: the three ops it stands for
    return softmax(masked_fill(mul(x, scale), future_mask(tq, tk, x.device()), -INFINITY), -1);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  cpu::causal_softmax(out, contiguous(x), tq, tk, scale);
  return out;
}

Tensor causal_softmax_backward(const Tensor& grad_out, const Tensor& out, double scale) {
  const char* op = "causal_softmax_backward";
  causal_dims(op, out, "out", scale);
  check_defined(op, grad_out, "grad_out");
  check_same_dtype(op, grad_out, "grad_out", out, "out");
  check_same_device(op, grad_out, "grad_out", out, "out");
  if (grad_out.shape() != out.shape())
    throw Error(fmt::format("{}: grad_out {} and out {} differ in shape", op, shape_str(grad_out.shape()),
                            shape_str(out.shape())));
  if (!out.device().is_cpu()) return mul(softmax_backward(grad_out, out, -1), scale);
  Tensor grad_in = empty(out.shape(), out.dtype(), out.device());
  cpu::causal_softmax_backward(grad_in, contiguous(grad_out), contiguous(out), scale);
  return grad_in;
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_forward("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_forward("log_softmax", x, dim, true); }
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl("softmax_backward", grad_out, out, dim, false);
}
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl("log_softmax_backward", grad_out, out, dim, true);
}

LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  check_layer_norm_input(op, x);
  check_affine(op, weight, "weight", x);
  check_affine(op, bias, "bias", x);
  if (!(eps >= 0)) throw Error(fmt::format("layer_norm: eps must be >= 0, got {}", eps));
  const DType sd = stats_dtype(x.dtype());
  LayerNormResult r{empty(x.shape(), x.dtype(), x.device()), empty(without_last(x.shape()), sd, x.device()),
                    empty(without_last(x.shape()), sd, x.device())};
  ACCEL_DISPATCH(op, x.device(), layer_norm, r.out, r.mean, r.rstd, contiguous(x),
                 weight.defined() ? contiguous(weight) : weight, bias.defined() ? contiguous(bias) : bias, eps);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, const Tensor& bias) {
  const char* op = "layer_norm_backward";
  check_layer_norm_input(op, x);
  check_defined(op, grad_out, "grad_out");
  check_defined(op, mean, "mean");
  check_defined(op, rstd, "rstd");
  check_shape(op, grad_out, "grad_out", x.shape(), " (the shape of x)");
  check_same_dtype(op, grad_out, "grad_out", x, "x");
  check_same_device(op, grad_out, "grad_out", x, "x");
  const DType sd = stats_dtype(x.dtype());
  for (const auto& [t, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    check_shape(op, *t, name, without_last(x.shape()), " (x's shape without its last dim)");
    if (t->dtype() != sd)
      throw Error(fmt::format("{}: {} is {}, expected {} for {} x", op, name, dtype_name(t->dtype()), dtype_name(sd),
                              dtype_name(x.dtype())));
    check_same_device(op, *t, name, x, "x");
  }
  check_affine(op, weight, "weight", x);
  check_affine(op, bias, "bias", x);
  const Shape affine{x.shape().back()};
  LayerNormGrads g{empty(x.shape(), x.dtype(), x.device()),
                   weight.defined() ? empty(affine, x.dtype(), x.device()) : Tensor(),
                   bias.defined() ? empty(affine, x.dtype(), x.device()) : Tensor()};
  ACCEL_DISPATCH(op, x.device(), layer_norm_backward, g.grad_input, g.grad_weight, g.grad_bias, contiguous(grad_out),
                 contiguous(x), contiguous(mean), contiguous(rstd), weight.defined() ? contiguous(weight) : weight);
  return g;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  const char* op = "embedding";
  check_defined(op, weight, "weight");
  check_defined(op, indices, "indices");
  if (weight.dim() != 2)
    throw Error(fmt::format("embedding: weight must be 2-d [num, dim], got {}", shape_str(weight.shape())));
  check_index_dtype(op, indices, "indices");
  check_same_device(op, indices, "indices", weight, "weight");
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.shape()[1]);
  Tensor out = empty(out_shape, weight.dtype(), weight.device());
  ACCEL_DISPATCH(op, weight.device(), embedding, out, contiguous(weight), contiguous(indices));
  return out;
}

int64_t normalize_padding_idx(const char* op, int64_t padding_idx, int64_t num_weights) {
  if (padding_idx < -num_weights || padding_idx >= num_weights)
    throw Error(fmt::format("{}: padding_idx {} is out of range for {} rows (expected {}..{})", op, padding_idx,
                            num_weights, -num_weights, num_weights - 1));
  return padding_idx < 0 ? padding_idx + num_weights : padding_idx;
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx) {
  const char* op = "embedding_backward";
  check_defined(op, grad_out, "grad_out");
  check_defined(op, indices, "indices");
  check_floating(op, grad_out);
  check_index_dtype(op, indices, "indices");
  check_same_device(op, indices, "indices", grad_out, "grad_out");
  if (num_weights < 0) throw Error(fmt::format("embedding_backward: num_weights must be >= 0, got {}", num_weights));
  const bool matches = grad_out.dim() == indices.dim() + 1 &&
                       std::equal(indices.shape().begin(), indices.shape().end(), grad_out.shape().begin());
  if (!matches)
    throw Error(fmt::format("embedding_backward: grad_out {} must be the indices' shape {} plus one trailing dim",
                            shape_str(grad_out.shape()), shape_str(indices.shape())));
  const std::optional<int64_t> padding_row =
      padding_idx ? std::optional(normalize_padding_idx(op, *padding_idx, num_weights)) : std::nullopt;
  Tensor grad_weight = empty({num_weights, grad_out.shape().back()}, grad_out.dtype(), grad_out.device());
  ACCEL_DISPATCH(op, grad_out.device(), embedding_backward, grad_weight, contiguous(grad_out), contiguous(indices));
  if (padding_row) zero_(select(grad_weight, 0, *padding_row));  // PyTorch's padding: a row that never learns
  return grad_weight;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
  check_cross_entropy_inputs(op, logits, target);
  check_cross_entropy_options(op, logits, options);
  if (!is_plain(options) && !logits.device().is_cpu()) return cross_entropy_by_ops(logits, target, options);
  Tensor loss = empty(loss_shape(logits, options.reduction), stats_dtype(logits.dtype()), logits.device());
  if (is_plain(options))
    ACCEL_DISPATCH(op, logits.device(), cross_entropy, loss, contiguous(logits), contiguous(target),
                   options.ignore_index, options.reduction);
  else
    cpu::cross_entropy(loss, contiguous(logits), contiguous(target), cpu_options(logits, options));
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  return nograd::cross_entropy(logits, target, {.ignore_index = ignore_index, .reduction = reduction});
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                              const CrossEntropyOptions& options) {
  const char* op = "cross_entropy_backward";
  check_cross_entropy_inputs(op, logits, target);
  check_cross_entropy_options(op, logits, options);
  check_defined(op, grad_loss, "grad_loss");
  const Shape expected = loss_shape(logits, options.reduction);
  if (grad_loss.shape() != expected)
    throw Error(fmt::format("{}: grad_loss has shape {}, expected {} for reduction {}", op,
                            shape_str(grad_loss.shape()), shape_str(expected), reduction_name(options.reduction)));
  const DType ld = stats_dtype(logits.dtype());
  if (grad_loss.dtype() != ld)
    throw Error(fmt::format("{}: grad_loss is {}, expected {} (the loss dtype for {} logits)", op,
                            dtype_name(grad_loss.dtype()), dtype_name(ld), dtype_name(logits.dtype())));
  check_same_device(op, grad_loss, "grad_loss", logits, "logits");
  if (!is_plain(options) && !logits.device().is_cpu())
    return cross_entropy_backward_by_ops(grad_loss, logits, target, options);
  Tensor grad = empty(logits.shape(), logits.dtype(), logits.device());
  if (is_plain(options))
    ACCEL_DISPATCH(op, logits.device(), cross_entropy_backward, grad, contiguous(grad_loss), contiguous(logits),
                   contiguous(target), options.ignore_index, options.reduction);
  else
    cpu::cross_entropy_backward(grad, contiguous(grad_loss), contiguous(logits), contiguous(target),
                                cpu_options(logits, options));
  return grad;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
                              int64_t ignore_index, Reduction reduction) {
  return nograd::cross_entropy_backward(grad_loss, logits, target,
                                        {.ignore_index = ignore_index, .reduction = reduction});
}

DropoutResult dropout(const Tensor& x, double p, Generator& gen) {
  const char* op = "dropout";
  check_defined(op, x, "x");
  check_floating(op, x);
  if (!(p >= 0.0 && p <= 1.0)) throw Error(fmt::format("dropout: p must be in [0, 1], got {}", p));
  // Reserved whatever p is, so changing p does not shift the draws of later random ops.
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(static_cast<uint64_t>(x.numel())));
  if (p == 0.0) return {x, full(x.shape(), 1.0, DType::boolean, x.device())};
  DropoutResult r{empty(x.shape(), x.dtype(), x.device()), empty(x.shape(), DType::boolean, x.device())};
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;  // nothing is kept at p = 1
  ACCEL_DISPATCH(op, x.device(), dropout, r.out, r.keep_mask, contiguous(x), static_cast<float>(p), scale, seed,
                 offset);
  return r;
}

}  // namespace accel::nograd
