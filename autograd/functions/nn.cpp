// Differentiable neural-network ops: each backward calls the matching raw backward op of
// tensor/nograd/nn_ops.h, which shares its per-element math with the CUDA kernels.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/attention.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

Tensor softmax(const Tensor& x_in, int64_t dim) {
  const Tensor x = autocast::to_reduction(x_in);
  Tensor out = nograd::softmax(x, dim);
  record("SoftmaxBackward", {x}, {out}, [out = detach(out), dim](const Grads& g) -> Grads {
    return {nograd::softmax_backward(g[0], out, dim)};
  });
  return out;
}

Tensor log_softmax(const Tensor& x_in, int64_t dim) {
  const Tensor x = autocast::to_reduction(x_in);
  Tensor out = nograd::log_softmax(x, dim);
  record("LogSoftmaxBackward", {x}, {out}, [out = detach(out), dim](const Grads& g) -> Grads {
    return {nograd::log_softmax_backward(g[0], out, dim)};
  });
  return out;
}

Tensor causal_softmax(const Tensor& x_in, double scale) {
  const Tensor x = autocast::to_reduction(x_in);
  Tensor out = nograd::causal_softmax(x, scale);
  record("CausalSoftmaxBackward", {x}, {out}, [out = detach(out), scale](const Grads& g) -> Grads {
    return {nograd::causal_softmax_backward(g[0], out, scale)};
  });
  return out;
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  nograd::CausalAttentionResult r = nograd::causal_attention(q, k, v, scale);
  record("CausalAttentionBackward", {q, k, v}, {r.out},
         [q = detach(q), k = detach(k), v = detach(v), out = detach(r.out), lse = r.lse,
          scale](const Grads& g) -> Grads {
           nograd::CausalAttentionGrads d = nograd::causal_attention_backward(g[0], q, k, v, out, lse, scale);
           return {d.grad_q, d.grad_k, d.grad_v};
         });
  return r.out;
}

Tensor layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps) {
  const Tensor x = autocast::to_reduction(x_in), weight = autocast::to_reduction(weight_in),
               bias = autocast::to_reduction(bias_in);
  nograd::LayerNormResult r = nograd::layer_norm(x, weight, bias, eps);
  record("LayerNormBackward", {x, weight, bias}, {r.out},
         [x = detach(x), weight = detach(weight), bias = detach(bias), mean = r.mean,
          rstd = r.rstd](const Grads& g) -> Grads {
           nograd::LayerNormGrads d = nograd::layer_norm_backward(g[0], x, mean, rstd, weight, bias);
           return {d.grad_input, d.grad_weight, d.grad_bias};
         });
  return r.out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  Tensor out = nograd::embedding(weight, indices);
  const int64_t num = weight.shape()[0];
  if (padding_idx) padding_idx = nograd::normalize_padding_idx("embedding", *padding_idx, num);
  record("EmbeddingBackward", {weight}, {out}, [indices = detach(indices), num, padding_idx](const Grads& g) -> Grads {
    return {nograd::embedding_backward(g[0], indices, num, padding_idx)};
  });
  return out;
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const CrossEntropyOptions& options) {
  const Tensor logits = autocast::to_reduction(logits_in);
  Tensor loss = nograd::cross_entropy(logits, target, options);
  CrossEntropyOptions saved = options;
  saved.weight = detach(options.weight);
  record("CrossEntropyBackward", {logits}, {loss},
         [logits = detach(logits), target = detach(target), saved](const Grads& g) -> Grads {
           return {nograd::cross_entropy_backward(g[0], logits, target, saved)};
         });
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  return cross_entropy(logits, target, {.ignore_index = ignore_index, .reduction = reduction});
}

Tensor dropout(const Tensor& x, double p, Generator& gen) {
  nograd::DropoutResult r = nograd::dropout(x, p, gen);
  if (r.out.is_same(x)) return x;  // p = 0: the identity, nothing to record
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  record("DropoutBackward", {x}, {r.out}, [mask = r.keep_mask, scale](const Grads& g) -> Grads {
    return {nograd::where(mask, nograd::mul(g[0], scale), scalar_tensor(0.0, g[0].dtype(), g[0].device()))};
  });
  return r.out;
}

}  // namespace accel
