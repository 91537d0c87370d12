// Per-element updates of the fused optimizers (SGD with momentum, AdamW), shared by the CPU loop and
// the CUDA multi-tensor kernel. C is the compute type: float for f32/f16/bf16 params, double for f64.
// The host folds the hyper-parameters into the coefficient structs once per step.
#pragma once

#include "tensor/elementwise_math.h"
#include "tensor/hd.h"

namespace accel {

template <class C>
struct SgdCoeffs {
  C lr, momentum, one_minus_dampening, weight_decay;
  bool use_momentum;  // momentum != 0: a buffer exists
  bool nesterov;
  bool first_step;  // the buffer is set to the first grad instead of decayed (PyTorch's rule)
};

// PyTorch's SGD for one element: d = g + wd * p; buf = first ? d : momentum * buf + (1 - dampening) * d;
// d = nesterov ? d + momentum * buf : buf; returns p - lr * d. buf is untouched without momentum.
template <class C>
ACCEL_HD C sgd_update(C p, C g, C& buf, const SgdCoeffs<C>& k) {
  C d = g + k.weight_decay * p;
  if (k.use_momentum) {
    buf = k.first_step ? d : k.momentum * buf + k.one_minus_dampening * d;
    d = k.nesterov ? d + k.momentum * buf : buf;
  }
  return p - k.lr * d;
}

template <class C>
struct AdamWCoeffs {
  C one_minus_beta1, beta2, one_minus_beta2, eps;
  C decay;              // 1 - lr * weight_decay: the decoupled weight decay
  C step_size;          // lr / (1 - beta1^step)
  C sqrt_bias_correction2;  // sqrt(1 - beta2^step)
};

// PyTorch's AdamW for one element: p *= 1 - lr * wd; m = lerp(m, g, 1 - beta1);
// v = beta2 * v + (1 - beta2) * g^2; p -= step_size * m / (sqrt(v) / sqrt(bc2) + eps). Returns p.
template <class C>
ACCEL_HD C adamw_update(C p, C g, C& m, C& v, const AdamWCoeffs<C>& k) {
  p *= k.decay;
  m += k.one_minus_beta1 * (g - m);
  v = k.beta2 * v + k.one_minus_beta2 * g * g;
  const C denom = math_sqrt(v) / k.sqrt_bias_correction2 + k.eps;
  return p - k.step_size * m / denom;
}

}  // namespace accel
