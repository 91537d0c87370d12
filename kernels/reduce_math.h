// Combine steps of the row reductions, shared by the CPU tests and the CUDA kernels: the kernels
// reduce in a tree (lanes, warps, blocks), so each step must be associative and commutative and
// must give the serial CPU loop's answer whatever the order.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/elementwise_math.h"
#include "kernels/hd.h"

namespace accel {

// The start value of a max: -inf for floating types, the lowest value for integers.
template <class A>
ACCEL_HD A max_identity() {
  if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::lowest();
}

// max that lets NaN win, as numpy's and the CPU loop's do.
template <class A>
ACCEL_HD A max_combine(A a, A b) {
  return apply_binary<BinaryOp::maximum>(a, b);
}

// A candidate of argmax: the value and where it was found. index < 0 marks the empty candidate.
template <class A>
struct ArgMax {
  A value;
  int64_t index;
};

template <class A>
ACCEL_HD ArgMax<A> argmax_identity() {
  return ArgMax<A>{max_identity<A>(), -1};
}

// The first maximum of the elements both candidates cover; a NaN beats every number and the first
// NaN beats later ones, so the answer is the index of the first NaN when there is one.
template <class A>
ACCEL_HD ArgMax<A> argmax_combine(ArgMax<A> a, ArgMax<A> b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.index < b.index ? a : b;
    return a_nan ? a : b;
  }
  if (a.value > b.value) return a;
  if (b.value > a.value) return b;
  return a.index < b.index ? a : b;
}

}  // namespace accel
