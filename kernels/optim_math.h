// Per-element updates of the fused optimizers (SGD with momentum, AdamW) and the loss scaler's
// unscale step, shared by the CPU loops and the CUDA multi-tensor kernels. C is the compute type: float for f32/f16/bf16 params, double for f64.
// The host folds the hyper-parameters into the coefficient structs once per step.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise_math.h"
#include "kernels/hd.h"

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

// The coefficients of one step, computed in f64 on the host (as PyTorch computes its Python floats)
// and then rounded once to the compute type by coeffs_as, on every device alike.
inline SgdCoeffs<double> sgd_coeffs(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                                    bool first_step) {
  return SgdCoeffs<double>{lr, momentum, 1.0 - dampening, weight_decay, momentum != 0.0, nesterov, first_step};
}

inline AdamWCoeffs<double> adamw_coeffs(double lr, double beta1, double beta2, double eps, double weight_decay,
                                        int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  return AdamWCoeffs<double>{1.0 - beta1,           beta2, 1.0 - beta2, eps, 1.0 - lr * weight_decay,
                             lr / bias_correction1, std::sqrt(bias_correction2)};
}

template <class C>
SgdCoeffs<C> coeffs_as(const SgdCoeffs<double>& k) {
  return SgdCoeffs<C>{static_cast<C>(k.lr), static_cast<C>(k.momentum), static_cast<C>(k.one_minus_dampening),
                      static_cast<C>(k.weight_decay), k.use_momentum, k.nesterov, k.first_step};
}

template <class C>
AdamWCoeffs<C> coeffs_as(const AdamWCoeffs<double>& k) {
  return AdamWCoeffs<C>{static_cast<C>(k.one_minus_beta1), static_cast<C>(k.beta2), static_cast<C>(k.one_minus_beta2),
                        static_cast<C>(k.eps),             static_cast<C>(k.decay), static_cast<C>(k.step_size),
                        static_cast<C>(k.sqrt_bias_correction2)};
}

// false for inf and NaN. Written without std::isfinite so that host and device share it; x - x is
// 0 for every finite x and NaN otherwise (accel is never built with -ffast-math).
template <class C>
ACCEL_HD bool is_finite_value(C x) {
  return x - x == C(0);
}

// The loss scaler's unscale of one gradient element: returns g * inv_scale and clears `finite` when g
// is inf or NaN. The check looks at g itself, as PyTorch's does, so a finite g that inv_scale > 1
// would overflow does not count.
template <class C>
ACCEL_HD C unscale_grad(C g, C inv_scale, bool& finite) {
  if (!is_finite_value(g)) finite = false;
  return g * inv_scale;
}

}  // namespace accel
