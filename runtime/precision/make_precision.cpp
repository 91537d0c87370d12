// make_precision: the policy from the settings, then the recipe that implements it.
#include "runtime/precision/make_precision.h"

#include <fmt/format.h>

#include "runtime/precision/fp16_precision.h"
#include "runtime/precision/fp8_precision.h"
#include "runtime/precision/half_precision.h"

namespace accel {

std::unique_ptr<Precision> make_precision(const EffectiveSettings& settings,
                                          const std::optional<LossScalerOptions>& loss_scaler, Communicator* comm,
                                          Device device) {
  const Setting<MixedPrecision>& mp = settings.mixed_precision;
  const Setting<GradCommDType>& comm_dtype = settings.grad_comm_dtype;
  PrecisionPolicy policy;
  try {
    policy = PrecisionPolicy::from_settings(mp.value, comm_dtype.value);
  } catch (const Error& e) {
    throw Error(fmt::format("Accelerator: mixed_precision={} (from {}) and grad_comm_dtype={} (from {}) conflict: {}",
                            name_of(mp.value), mp.source, name_of(comm_dtype.value), comm_dtype.source, e.what()));
  }
  if (loss_scaler && mp.value != MixedPrecision::fp16)
    throw Error(fmt::format("Accelerator: loss_scaler options (from code) conflict with mixed_precision={} (from {}): "
                            "only fp16 uses a loss scaler; drop the loss_scaler options or use fp16",
                            name_of(mp.value), mp.source));
  if (settings.fp8.from_code && mp.value != MixedPrecision::fp8)
    throw Error(fmt::format("Accelerator: fp8_recipe options (from code) conflict with mixed_precision={} (from {}): "
                            "only fp8 uses them; drop the fp8_recipe options or use fp8",
                            name_of(mp.value), mp.source));
  if (mp.value == MixedPrecision::fp8) {
    check_fp8_device(device, settings.fp8.allow_emulation.value);
    return std::make_unique<Fp8Precision>(policy, settings.fp8.recipe(), comm);
  }
  if (mp.value == MixedPrecision::fp16) return std::make_unique<Fp16Precision>(policy, loss_scaler.value_or(LossScalerOptions{}), comm);
  if (mp.value == MixedPrecision::bf16) return std::make_unique<HalfPrecision>(policy);
  return std::make_unique<FullPrecision>();
}

}  // namespace accel
