// Fused optimizer entry points: check the hyper-parameters and that the lists line up (length, shape,
// dtype, device, layout) once, then dispatch the whole list to the CPU loop or the CUDA kernel.
#include "tensor/nograd/optim_ops.h"

#include <fmt/format.h>

#include <cmath>

#include "tensor/cpu/optim.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/optim.h"
#endif

namespace accel::nograd {

namespace {

// Optimizer state is f32, or f64 for f64 params; f16/bf16 params therefore update in f32.
DType state_dtype(DType param) { return compute_dtype(param); }

void check_length(const char* op, size_t params, size_t n, const char* list) {
  if (n != params) throw Error(fmt::format("{}: {} params but {} {}", op, params, n, list));
}

void check_non_negative(const char* op, const char* name, double value) {
  if (!(value >= 0.0)) throw Error(fmt::format("{}: {} must be >= 0, got {}", op, name, value));
}

void check_beta(const char* op, const char* name, double value) {
  if (!(value >= 0.0 && value < 1.0)) throw Error(fmt::format("{}: {} must be in [0, 1), got {}", op, name, value));
}

void check_contiguous(const char* op, const Tensor& t, const char* list, size_t i) {
  if (!t.is_contiguous())
    throw Error(fmt::format("{}: {}[{}] is not contiguous (shape {}, strides {}); it is updated in place", op, list,
                            i, shape_str(t.shape()), shape_str(t.strides())));
}

// Every tensor of list (named list) defined, floating and on list[0]'s device.
void check_floating_list(const char* op, const std::vector<Tensor>& tensors, const char* list) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) throw Error(fmt::format("{}: {}[{}] is undefined", op, list, i));
    if (!is_floating(t.dtype()))
      throw Error(fmt::format("{}: {}[{}] is {}, expected a floating dtype (f64, f32, f16, bf16)", op, list, i,
                              dtype_name(t.dtype())));
    if (t.device() != tensors[0].device())
      throw Error(fmt::format("{}: {}[{}] is on {} but {}[0] is on {}", op, list, i, t.device().str(), list,
                              tensors[0].device().str()));
  }
}

void check_params(const char* op, const std::vector<Tensor>& params) {
  check_floating_list(op, params, "params");
  for (size_t i = 0; i < params.size(); ++i) check_contiguous(op, params[i], "params", i);
}

// A grad or state tensor that goes with params[i]; state tensors are written in place.
void check_companion(const char* op, const Tensor& t, const char* list, size_t i, const Tensor& param, bool is_state) {
  if (!t.defined()) throw Error(fmt::format("{}: {}[{}] is undefined", op, list, i));
  if (t.shape() != param.shape())
    throw Error(fmt::format("{}: {}[{}] has shape {}, expected {} like params[{}]", op, list, i, shape_str(t.shape()),
                            shape_str(param.shape()), i));
  const DType expected = is_state ? state_dtype(param.dtype()) : param.dtype();
  if (t.dtype() != expected)
    throw Error(fmt::format("{}: {}[{}] is {}, expected {} for {} params[{}]", op, list, i, dtype_name(t.dtype()),
                            dtype_name(expected), dtype_name(param.dtype()), i));
  if (t.device() != param.device())
    throw Error(fmt::format("{}: {}[{}] is on {} but params[{}] is on {}", op, list, i, t.device().str(), i,
                            param.device().str()));
  if (is_state) check_contiguous(op, t, list, i);
}

// Grads may come in any layout; the fused loops read them as flat arrays.
std::vector<Tensor> checked_grads(const char* op, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  check_length(op, params.size(), grads.size(), "grads");
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    check_companion(op, grads[i], "grads", i, params[i], false);
    out.push_back(contiguous(grads[i]));
  }
  return out;
}


}  // namespace

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const SgdConfig& config, bool first_step) {
  const char* op = "sgd_step_";
  check_non_negative(op, "lr", config.lr);
  check_non_negative(op, "momentum", config.momentum);
  check_non_negative(op, "weight_decay", config.weight_decay);
  if (config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0))
    throw Error(fmt::format("sgd_step_: nesterov needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
                            config.momentum, config.dampening));
  check_params(op, params);
  const std::vector<Tensor> g = checked_grads(op, params, grads);
  if (config.momentum != 0.0 || !momentum_buffers.empty()) {
    check_length(op, params.size(), momentum_buffers.size(), "momentum_buffers");
    for (size_t i = 0; i < params.size(); ++i)
      check_companion(op, momentum_buffers[i], "momentum_buffers", i, params[i], true);
  }
  if (params.empty()) return;
  ACCEL_DISPATCH(op, params[0].device(), sgd_step_, params, g, momentum_buffers, config, first_step);
}

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const AdamWConfig& config, int64_t step) {
  const char* op = "adamw_step_";
  check_non_negative(op, "lr", config.lr);
  check_beta(op, "beta1", config.beta1);
  check_beta(op, "beta2", config.beta2);
  check_non_negative(op, "eps", config.eps);
  check_non_negative(op, "weight_decay", config.weight_decay);
  if (step < 1) throw Error(fmt::format("adamw_step_: step counts from 1, got {}", step));
  check_params(op, params);
  const std::vector<Tensor> g = checked_grads(op, params, grads);
  check_length(op, params.size(), exp_avgs.size(), "exp_avgs");
  check_length(op, params.size(), exp_avg_sqs.size(), "exp_avg_sqs");
  for (size_t i = 0; i < params.size(); ++i) {
    check_companion(op, exp_avgs[i], "exp_avgs", i, params[i], true);
    check_companion(op, exp_avg_sqs[i], "exp_avg_sqs", i, params[i], true);
  }
  if (params.empty()) return;
  ACCEL_DISPATCH(op, params[0].device(), adamw_step_, params, g, exp_avgs, exp_avg_sqs, config, step);
}

bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale) {
  const char* op = "unscale_and_check_";
  if (!std::isfinite(inv_scale) || inv_scale <= 0.0)
    throw Error(fmt::format("{}: inv_scale must be finite and > 0, got {}", op, inv_scale));
  check_floating_list(op, grads, "grads");
  for (size_t i = 0; i < grads.size(); ++i) check_contiguous(op, grads[i], "grads", i);
  if (grads.empty()) return false;
  if (grads[0].device().is_cpu()) return cpu::unscale_and_check_(grads, inv_scale);
#if ACCEL_WITH_CUDA
  return cuda::unscale_and_check_(grads, inv_scale);
#else
  throw_no_cuda(op, grads[0].device());
#endif
}

double grad_norm_power(const std::vector<Tensor>& grads, double norm_type) {
  const char* op = "grad_norm_power";
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  if (!inf && !(norm_type > 0 && std::isfinite(norm_type)))
    throw Error(fmt::format("{}: norm_type must be > 0 or inf, got {}", op, norm_type));
  check_floating_list(op, grads, "grads");
  if (grads.empty()) return 0.0;
  if (grads[0].device().is_cpu()) {
    std::vector<Tensor> dense;
    dense.reserve(grads.size());
    for (const Tensor& g : grads) dense.push_back(contiguous(g));
    return cpu::grad_norm_power(dense, norm_type);
  }
  // Accumulated in f64 so the norm of a large model does not lose digits.
  double total = 0;
  for (const Tensor& g : grads) {
    const Tensor a = abs(to_dtype(g, DType::f64));
    if (inf) total = std::max(total, max(a).item());
    else total += sum(norm_type == 2.0 ? mul(a, a) : pow(a, norm_type)).item();
  }
  return total;
}

}  // namespace accel::nograd
