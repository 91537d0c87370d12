// Floating point to integer conversion with one defined result on every device: toward zero,
// saturating at the integer type's range, NaN to 0. Shared by the CPU casts and the CUDA kernels.
#pragma once

#include <limits>
#include <type_traits>

#include "kernels/hd.h"

namespace accel {

// C++ leaves a value outside the integer's range undefined, and the machines differ: x86's
// cvttss2si gives the integer minimum for NaN and for both overflows, CUDA's cvt.rzi saturates
// and gives 0 for NaN. This is CUDA's rule (AArch64's fcvtzs and Rust's `as` have it too), on both.
template <class I, class F>
ACCEL_HD_INLINE I float_to_int(F v) {
  static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool> && std::is_floating_point_v<F>,
                "float_to_int: an integer from a floating point value");
  // 2^(bits - 1) for a signed I, 2^bits for an unsigned one: powers of two, so exact in F.
  constexpr F kLimit = F(2) * static_cast<F>(std::numeric_limits<I>::max() / 2 + 1);
  constexpr F kLow = static_cast<F>(std::numeric_limits<I>::min());  // -2^(bits - 1), or 0
  if (v != v) return I(0);
  if (v >= kLimit) return std::numeric_limits<I>::max();
  if (v < kLow) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

}  // namespace accel
