// Reduction: how a loss combines its per-position values (none, mean, sum). Shared by the raw and the
// differentiable cross_entropy, so it lives with the tensor rather than in either op layer.
#pragma once

#include <cstdint>

namespace accel {

// In namespace accel rather than accel::nograd: argument-dependent lookup on a Reduction argument would
// otherwise find nograd::cross_entropy next to accel::cross_entropy and make a user's call ambiguous.
// The values are fixed: a Reduction can be written to a file or sent between ranks.
enum class Reduction : uint8_t { none = 0, mean = 1, sum = 2 };

}  // namespace accel
