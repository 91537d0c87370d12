// LossScaler: the scale's growth and backoff, the fused unscale, and its saved state.
#include "runtime/precision/loss_scaler.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/optim_ops.h"
#include "tensor/nograd/views.h"

namespace accel {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {
  const LossScalerOptions& o = options_;
  if (!(o.init_scale >= std::numeric_limits<float>::min() && o.init_scale <= std::numeric_limits<float>::max()))
    throw Error(fmt::format("LossScaler: init_scale must be a positive normal f32 value (1.2e-38 to 3.4e+38), got {}",
                            o.init_scale));
  if (!(std::isfinite(o.growth_factor) && o.growth_factor > 1))
    throw Error(fmt::format("LossScaler: growth_factor must be finite and > 1, got {}", o.growth_factor));
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
    throw Error(fmt::format("LossScaler: backoff_factor must be in (0, 1), got {}", o.backoff_factor));
  if (o.growth_interval < 1)
    throw Error(fmt::format("LossScaler: growth_interval must be >= 1, got {}", o.growth_interval));
}

bool LossScaler::unscale(const std::vector<Tensor>& grads) const {
  std::vector<Tensor> flat;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (a grad that is not contiguous, its contiguous copy)
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    if (g.is_contiguous()) {
      flat.push_back(g);
    } else {
      copies.emplace_back(g, nograd::contiguous(g));
      flat.push_back(copies.back().second);
    }
  }
  const bool found_inf = nograd::unscale_and_check_(flat, 1.0 / scale_);
  for (const auto& [grad, copy] : copies) nograd::copy_(grad, copy);
  return found_inf;
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    // Never below the smallest normal f32: the loss is scaled in f32 and the grads unscaled by an f32
    // 1 / scale, which must stay finite (else 0 * inf would put NaN into clean grads).
    scale_ = std::max(scale_ * options_.backoff_factor, static_cast<double>(std::numeric_limits<float>::min()));
    clean_steps_ = 0;
    ++skipped_steps_;
    return;
  }
  if (++clean_steps_ >= options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (grown <= std::numeric_limits<float>::max()) scale_ = grown;
    clean_steps_ = 0;
  }
}

std::string LossScaler::describe() const {
  return fmt::format("loss scale {}, {} skipped step{}", scale_, skipped_steps_, skipped_steps_ == 1 ? "" : "s");
}

optim::StateDict LossScaler::state_dict() const {
  return {{"scale", scalar_tensor(scale_, DType::f64)},
          {"clean_steps", scalar_tensor(static_cast<double>(clean_steps_), DType::i64)},
          {"skipped_steps", scalar_tensor(static_cast<double>(skipped_steps_), DType::i64)}};
}

void LossScaler::load_state_dict(const optim::StateDict& state) {
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  std::string missing;
  for (const char* key : {"scale", "clean_steps", "skipped_steps"})
    if (!by_name.count(key) || !by_name[key].defined() || by_name[key].numel() != 1)
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", key);
  if (!missing.empty())
    throw Error(fmt::format("LossScaler::load_state_dict: missing or not one-element: {}", missing));
  const double scale = by_name["scale"].item();
  if (!(std::isfinite(scale) && scale > 0))
    throw Error(fmt::format("LossScaler::load_state_dict: scale must be finite and > 0, got {}", scale));
  scale_ = scale;
  clean_steps_ = static_cast<int64_t>(by_name["clean_steps"].item());
  skipped_steps_ = static_cast<int64_t>(by_name["skipped_steps"].item());
}

}  // namespace accel
