// Per-element math of the neural-network ops (softmax, layer norm, cross-entropy, dropout), shared by
// the CPU loops and the CUDA kernels. C is the compute type: float (for f32/f16/bf16) or double.
#pragma once

#include <cstdint>

#include "kernels/elementwise_math.h"
#include "kernels/hd.h"
#include "kernels/philox.h"

namespace accel {

// Softmax of one element, given its row's max and 1 / sum(exp(x - max)). Subtracting the max keeps
// every exp in (0, 1], so large logits cannot overflow.
template <class C>
ACCEL_HD C softmax_elem(C x, C row_max, C inv_sum) {
  return math_exp(x - row_max) * inv_sum;
}

// Running (max, sum of exp(x - max)) of a softmax row, for kernels that read a row once: folding in
// another part's (max2, sum2) rescales whichever sum was taken against the smaller max. Any split of
// the row and any combine order give the two-pass answer up to rounding; -inf parts add nothing.
template <class C>
ACCEL_HD void online_softmax_combine(C& row_max, C& sum_exp, C max2, C sum2) {
  if (max2 > row_max) {
    sum_exp = sum_exp * math_exp(row_max - max2) + sum2;
    row_max = max2;
  } else if (max2 == row_max) {
    sum_exp += sum2;
  } else {
    sum_exp += sum2 * math_exp(max2 - row_max);
  }
}

// Folds one element x into a running (max, sum of exp(x - max)).
template <class C>
ACCEL_HD void online_softmax_add(C& row_max, C& sum_exp, C x) {
  online_softmax_combine(row_max, sum_exp, x, C(1));
}

// Log-softmax of one element, given its row's max and log(sum(exp(x - max))).
template <class C>
ACCEL_HD C log_softmax_elem(C x, C row_max, C log_sum) {
  return x - row_max - log_sum;
}

// d softmax: dx = y * (dy - sum(dy * y)); dot is that row sum.
template <class C>
ACCEL_HD C softmax_backward_elem(C dy, C y, C dot) {
  return y * (dy - dot);
}

// d log_softmax: dx = dy - softmax * sum(dy), with softmax = exp(y) for the log-softmax output y.
template <class C>
ACCEL_HD C log_softmax_backward_elem(C dy, C y, C sum_dy) {
  return dy - math_exp(y) * sum_dy;
}

// 1 / sqrt(var + eps), with var the biased (divide by n) variance of the row.
template <class C>
ACCEL_HD C layer_norm_rstd(C var, C eps) {
  return C(1) / math_sqrt(var + eps);
}

// Layer norm's row statistics, in two passes that stay accurate on rows far from zero (one element at
// a time, an f32 sum of 1000 + N(0, 1) keeps a few bits of each deviation, and loses more as the row
// grows). Pass 1 sums x - shift, shift = the row's first element, for the mean. Pass 2 sums
// d = x - mean (exact where x is within a factor of 2 of mean) and d^2: sum(d) / n is what the rounded
// mean missed, which the variance is corrected for (the corrected two-pass formula of Chan, Golub and
// LeVeque) and the output subtracts. Each pass sums in a tree (the CPU's pairwise blocks, the GPU's
// lanes and warps), so rounding grows as log n.
template <class C>
struct LayerNormRow {
  C mean;      // the rounded mean the deviations d were taken from
  C residual;  // sum(d) / n: the row's mean is mean + residual
  C rstd;
};

template <class C>
ACCEL_HD C layer_norm_mean(C shift, C shifted_sum, C inv_dim) {
  return shift + shifted_sum * inv_dim;
}

template <class C>
ACCEL_HD LayerNormRow<C> layer_norm_row(C mean, C dev_sum, C dev_sq_sum, C inv_dim, C eps) {
  const C residual = dev_sum * inv_dim;
  const C var = (dev_sq_sum - dev_sum * residual) * inv_dim;
  return {mean, residual, layer_norm_rstd(var < C(0) ? C(0) : var, eps)};  // NaN passes
}

// The mean a row reports (and the backward reads): mean + residual, rounded once.
template <class C>
ACCEL_HD C layer_norm_row_mean(const LayerNormRow<C>& row) {
  return row.mean + row.residual;
}

// The normalise-then-affine step; w = 1 and b = 0 when the layer has no weight / bias.
template <class C>
ACCEL_HD C layer_norm_elem(C x, const LayerNormRow<C>& row, C w, C b) {
  return ((x - row.mean) - row.residual) * row.rstd * w + b;
}

// dx of layer norm for one element. With xhat = (x - mean) * rstd and dxhat = dy * w, the row means
// mean_dxhat = mean(dxhat) and mean_dxhat_xhat = mean(dxhat * xhat) carry the dependence of mean and
// rstd on every element of the row.
template <class C>
ACCEL_HD C layer_norm_backward_elem(C dxhat, C xhat, C rstd, C mean_dxhat, C mean_dxhat_xhat) {
  return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}

// -log softmax(x)[target] for one row: logsumexp(x) - x[target], with logsumexp = max + log(sum_exp)
// and sum_exp = sum(exp(x - max)).
template <class C>
ACCEL_HD C cross_entropy_row_loss(C target_logit, C row_max, C sum_exp) {
  return row_max + math_log(sum_exp) - target_logit;
}

// The factor a row's loss grad carries: grad_loss / divisor (divisor = the number of counted rows for
// a mean, else 1), and 0 for an ignored row.
template <class C>
ACCEL_HD C cross_entropy_row_scale(C grad_loss, C divisor, bool ignored) {
  return ignored ? C(0) : grad_loss / divisor;
}

// d loss / d x for one element: scale * (softmax(x) - onehot(target)).
template <class C>
ACCEL_HD C cross_entropy_grad_elem(C x, C row_max, C inv_sum, bool is_target, C scale) {
  return scale * (softmax_elem(x, row_max, inv_sum) - (is_target ? C(1) : C(0)));
}

// Cross-entropy with per-class weights w and label smoothing eps over C classes, PyTorch's: a row with
// target t costs (1 - eps) * w[t] * nll + eps / C * smooth_sum, where nll = logsumexp(x) - x[t] and
// smooth_sum = sum_c w[c] * (logsumexp(x) - x[c]). Callers pass smooth_sum = 0 when eps = 0, so an
// infinite smooth_sum (a -inf logit) cannot make 0 * inf.
template <class C>
ACCEL_HD C cross_entropy_smoothed_row_loss(C nll, C target_weight, C smooth_sum, C eps, C classes) {
  return (C(1) - eps) * target_weight * nll + eps / classes * smooth_sum;
}

// The per-row factors of that loss's grad: d loss / d x[j] = scale * (softmax(x)[j] * on_softmax -
// [j == t] * on_target - w[j] * on_weight), with on_target = (1 - eps) * w[t], on_weight = eps / C and
// on_softmax = on_target + on_weight * sum_c w[c] (the weight the row's targets add up to).
template <class C>
struct SmoothedGradCoefs {
  C on_softmax, on_target, on_weight;
};

template <class C>
ACCEL_HD SmoothedGradCoefs<C> cross_entropy_smoothed_coefs(C target_weight, C total_weight, C eps, C classes) {
  const C on_target = (C(1) - eps) * target_weight, on_weight = eps / classes;
  return {on_target + on_weight * total_weight, on_target, on_weight};
}

template <class C>
ACCEL_HD C cross_entropy_smoothed_grad_elem(C x, C row_max, C inv_sum, bool is_target, C weight, SmoothedGradCoefs<C> k,
                                            C scale) {
  return scale * (softmax_elem(x, row_max, inv_sum) * k.on_softmax - (is_target ? k.on_target : C(0)) -
                  weight * k.on_weight);
}

// Dropout keeps element i when its uniform draw u in [0, 1) satisfies u >= p: p = 0 keeps every
// element and p = 1 none. u has 24 random bits, so the kept fraction is 1 - ceil(p * 2^24) / 2^24.
ACCEL_HD bool dropout_keep_word(uint32_t word, float p) { return philox_uniform(word) >= p; }

// Element i's decision: word i % 4 of Philox block offset + i / 4. Kernels that draw a whole block
// per thread call dropout_keep_word on each of its four words, which is the same decision.
ACCEL_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  return dropout_keep_word(philox4x32(seed, offset + i / 4, 0).v[i % 4], p);
}

// A kept element scaled by 1 / (1 - p) (passed in as scale), or zero; never x * 0 * inf.
template <class C>
ACCEL_HD C dropout_elem(C x, bool keep, C scale) {
  return keep ? x * scale : C(0);
}

}  // namespace accel
