// CPU fused optimizer updates and the loss scaler's unscale: each element is loaded once, updated by
// the shared math of kernels/optim_math.h in the compute type, and stored once.
#include "tensor/cpu/optim.h"

#include "kernels/optim_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/nograd/optim_ops.h"
#include "tensor/op_time.h"

namespace accel::cpu {

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const nograd::SgdConfig& config, bool first_step) {
  const SgdCoeffs<double> coeffs = sgd_coeffs(config.lr, config.momentum, config.dampening, config.weight_decay,
                                              config.nesterov, first_step);
  for (size_t t = 0; t < params.size(); ++t) {
    dispatch_floating(params[t].dtype(), "sgd_step_", [&]<class T>() {
      using C = compute_t<T>;
      const SgdCoeffs<C> k = coeffs_as<C>(coeffs);
      T* p = static_cast<T*>(params[t].data_ptr());
      const T* g = static_cast<const T*>(grads[t].data_ptr());
      C* buf = k.use_momentum ? static_cast<C*>(momentum_buffers[t].data_ptr()) : nullptr;
      const int64_t n = params[t].numel();
#pragma omp parallel for if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        C unused = 0;
        p[i] = store<T>(sgd_update(load(p[i]), load(g[i]), buf ? buf[i] : unused, k));
      }
    });
  }
}

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const nograd::AdamWConfig& config, int64_t step) {
  const op_time::Scope timed(op_time::Kind::optimizer);
  const AdamWCoeffs<double> coeffs =
      adamw_coeffs(config.lr, config.beta1, config.beta2, config.eps, config.weight_decay, step);
  for (size_t t = 0; t < params.size(); ++t) {
    dispatch_floating(params[t].dtype(), "adamw_step_", [&]<class T>() {
      using C = compute_t<T>;
      const AdamWCoeffs<C> k = coeffs_as<C>(coeffs);
      T* p = static_cast<T*>(params[t].data_ptr());
      const T* g = static_cast<const T*>(grads[t].data_ptr());
      C* m = static_cast<C*>(exp_avgs[t].data_ptr());
      C* v = static_cast<C*>(exp_avg_sqs[t].data_ptr());
      const int64_t n = params[t].numel();
#pragma omp parallel for if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) p[i] = store<T>(adamw_update(load(p[i]), load(g[i]), m[i], v[i], k));
    });
  }
}

bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale) {
  bool all_finite = true;
  for (const Tensor& grad : grads) {
    dispatch_floating(grad.dtype(), "unscale_and_check_", [&]<class T>() {
      using C = compute_t<T>;
      const C s = static_cast<C>(inv_scale);
      T* g = static_cast<T*>(grad.data_ptr());
      const int64_t n = grad.numel();
      bool finite = true;
#pragma omp parallel for if (n > kParallelGrain) reduction(&& : finite)
      for (int64_t i = 0; i < n; ++i) {
        bool element_finite = true;
        g[i] = store<T>(unscale_grad(load(g[i]), s, element_finite));
        finite = finite && element_finite;
      }
      all_finite = all_finite && finite;
    });
  }
  return !all_finite;
}

}  // namespace accel::cpu
