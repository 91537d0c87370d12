// make_precision: the Precision that the settings ask for.
#pragma once

#include <memory>
#include <optional>

#include "collective/communicator.h"
#include "runtime/precision/loss_scaler.h"
#include "runtime/precision/precision.h"
#include "runtime/settings.h"

namespace accel {

// mixed_precision and grad_comm_dtype from settings; loss_scaler (given in code) only with fp16, the
// fp8 recipe given in code only with fp8. comm agrees on fp16 overflows and fp8 amaxes across ranks
// (null with one process); device is where training runs (fp8 on a GPU needs sm_89+ or emulation).
// Throws naming the settings and where they came from when they contradict each other.
std::unique_ptr<Precision> make_precision(const EffectiveSettings& settings,
                                          const std::optional<LossScalerOptions>& loss_scaler, Communicator* comm,
                                          Device device = Device::cpu());

}  // namespace accel
