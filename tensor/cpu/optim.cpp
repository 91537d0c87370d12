// CPU fused optimizer updates and the loss scaler's unscale: each element is loaded once, updated by
// the shared math of kernels/optim_math.h in the compute type, and stored once.
#include "tensor/cpu/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/optim_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/cpu/row_sum.h"
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

namespace {

// Elements per block of the norm's sum: the blocks are summed apart (in parallel) and then in order.
constexpr int64_t kNormBlock = int64_t{1} << 15;

// The largest |x| of x[begin, end), NaN when one is NaN.
template <class T>
double max_abs(const T* x, int64_t begin, int64_t end) {
  double m = 0;
  for (int64_t i = begin; i < end; ++i) {
    const double a = std::abs(static_cast<double>(load(x[i])));
    m = (a > m || std::isnan(a)) && !std::isnan(m) ? a : m;
  }
  return m;
}

template <class T>
double block_power_sum(const T* x, int64_t begin, int64_t end, double norm_type) {
  if (norm_type == 2.0)
    return row_sums<1, double>(begin, end, [&](int64_t i) {
      const double v = load(x[i]);
      return std::array<double, 1>{v * v};
    })[0];
  return row_sums<1, double>(begin, end, [&](int64_t i) {
    return std::array<double, 1>{std::pow(std::abs(static_cast<double>(load(x[i]))), norm_type)};
  })[0];
}

}  // namespace

double grad_norm_power(const std::vector<Tensor>& grads, double norm_type) {
  const op_time::Scope timed(op_time::Kind::grad_norm);
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const Tensor& grad : grads) {
    dispatch_floating(grad.dtype(), "grad_norm_power", [&]<class T>() {
      const T* x = static_cast<const T*>(grad.data_ptr());
      const int64_t n = grad.numel(), blocks = (n + kNormBlock - 1) / kNormBlock;
      std::vector<double> parts(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kNormBlock, end = std::min(n, begin + kNormBlock);
        parts[b] = inf ? max_abs(x, begin, end) : block_power_sum(x, begin, end, norm_type);
      }
      for (double part : parts) {
        if (!inf) total += part;
        else if (std::isnan(part) || std::isnan(total)) total = std::numeric_limits<double>::quiet_NaN();
        else total = std::max(total, part);
      }
    });
  }
  return total;
}

}  // namespace accel::cpu
