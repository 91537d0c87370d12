// Delayed scaling's options and its per-role update, after Transformer Engine's
// transformer_engine/common/recipe/delayed_scaling.cu (amax_and_scale_update): roll, amax, scale.
#include "autograd/fp8/delayed_scaling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/error.h"

namespace accel::fp8 {

void RecipeOptions::validate() const {
  if (amax_history_len < 1)
    throw Error(fmt::format("fp8 recipe: amax_history_len is {}, expected at least 1", amax_history_len));
  if (margin < 0) throw Error(fmt::format("fp8 recipe: margin is {}, expected 0 or more", margin));
}

std::string RecipeOptions::describe() const {
  return fmt::format("{}, margin {}, amax {} over {} steps, first/last Linear in {}", name_in(kFormatNames, format),
                     margin, name_in(kAmaxAlgorithmNames, amax_compute_algo), amax_history_len,
                     include_first_last ? "fp8" : "bf16");
}

DType RecipeOptions::dtype_of(Role role) const {
  return format == Format::hybrid && role == Role::grad_output ? DType::f8_e5m2 : DType::f8_e4m3;
}

float fp8_max(DType dtype) {
  if (dtype == DType::f8_e4m3) return kFloat8E4M3Max;
  if (dtype == DType::f8_e5m2) return kFloat8E5M2Max;
  throw Error(fmt::format("fp8_max: dtype {} is not an fp8 dtype (f8_e4m3, f8_e5m2)", dtype_name(dtype)));
}

ScalingState::ScalingState(int64_t history_len) {
  if (history_len < 1)
    throw Error(fmt::format("fp8 ScalingState: amax history length is {}, expected at least 1", history_len));
  history.assign(static_cast<size_t>(history_len), 0.0f);
}

void ScalingState::record(float amax) { history[0] = std::max(history[0], amax_entry(amax)); }

void ScalingState::update(const RecipeOptions& options, float max) {
  if (static_cast<int64_t>(history.size()) != options.amax_history_len)
    throw Error(fmt::format("fp8 ScalingState::update: history holds {} steps but the recipe asks for {}",
                            history.size(), options.amax_history_len));
  const float last = history[0];
  float amax = last;
  if (options.amax_compute_algo == AmaxAlgorithm::max)
    for (const float a : history) amax = std::max(amax, a);  // inf wins; NaN never gets in (amax_entry)
  // torch.roll(history, -1) then history[0] = 0, as TE does: old[0] moves to the back, old[i + 1] to i,
  // and the fresh slot in front (where old[1] landed) starts the next step from 0.
  std::rotate(history.begin(), history.begin() + 1, history.end());
  history[0] = 0.0f;
  const float scaled_max = max * std::ldexp(1.0f, -options.margin);
  if (std::isfinite(amax) && amax > 0.0f) scale = scaled_max / amax;
}

}  // namespace accel::fp8
