// CPU fused optimizer updates: each element is loaded once, updated by the shared math of
// tensor/optim_math.h in the compute type, and stored once.
#include "tensor/cpu/optim.h"

#include <cmath>

#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/optim_math.h"

namespace accel::cpu {

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const ops::SgdConfig& config, bool first_step) {
  const bool use_momentum = config.momentum != 0.0;
  for (size_t t = 0; t < params.size(); ++t) {
    dispatch_floating(params[t].dtype(), "sgd_step_", [&]<class T>() {
      using C = compute_t<T>;
      const SgdCoeffs<C> k{static_cast<C>(config.lr),
                           static_cast<C>(config.momentum),
                           static_cast<C>(1.0 - config.dampening),
                           static_cast<C>(config.weight_decay),
                           use_momentum,
                           config.nesterov,
                           first_step};
      T* p = static_cast<T*>(params[t].data_ptr());
      const T* g = static_cast<const T*>(grads[t].data_ptr());
      C* buf = use_momentum ? static_cast<C*>(momentum_buffers[t].data_ptr()) : nullptr;
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
                 const ops::AdamWConfig& config, int64_t step) {
  // Bias corrections in f64 on the host, like PyTorch's Python-float step size.
  const double bias_correction1 = 1.0 - std::pow(config.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(config.beta2, static_cast<double>(step));
  for (size_t t = 0; t < params.size(); ++t) {
    dispatch_floating(params[t].dtype(), "adamw_step_", [&]<class T>() {
      using C = compute_t<T>;
      const AdamWCoeffs<C> k{static_cast<C>(1.0 - config.beta1),
                             static_cast<C>(config.beta2),
                             static_cast<C>(1.0 - config.beta2),
                             static_cast<C>(config.eps),
                             static_cast<C>(1.0 - config.lr * config.weight_decay),
                             static_cast<C>(config.lr / bias_correction1),
                             static_cast<C>(std::sqrt(bias_correction2))};
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

void unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale, bool& finite) {
  for (const Tensor& grad : grads) {
    dispatch_floating(grad.dtype(), "unscale_and_check_", [&]<class T>() {
      using C = compute_t<T>;
      const C k = static_cast<C>(inv_scale);
      T* g = static_cast<T*>(grad.data_ptr());
      const int64_t n = grad.numel();
      // Each thread keeps its own flag; a plain && reduction folds them, with no shared write per element.
      bool all_finite = true;
#pragma omp parallel for reduction(&& : all_finite) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        bool ok = true;
        g[i] = store<T>(unscale_grad(load(g[i]), k, ok));
        all_finite = all_finite && ok;
      }
      if (!all_finite) finite = false;
    });
  }
}

}  // namespace accel::cpu
