// Comparisons and masks in the user's op set. Their results are bool and never need a grad, so each
// computes the raw op; they are here so that accel.h offers them without exposing tensor/nograd.
#include "autograd/functions.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

#define ACCEL_COMPARISON(name)                                                              \
  Tensor name(const Tensor& a, const Tensor& b) { return nograd::name(a, b); }              \
  Tensor name(const Tensor& a, double b) { return nograd::name(a, b); }

ACCEL_COMPARISON(eq)
ACCEL_COMPARISON(ne)
ACCEL_COMPARISON(lt)
ACCEL_COMPARISON(le)
ACCEL_COMPARISON(gt)
ACCEL_COMPARISON(ge)
#undef ACCEL_COMPARISON

Tensor isfinite(const Tensor& t) { return nograd::isfinite(t); }
Tensor logical_not(const Tensor& t) { return nograd::logical_not(t); }

}  // namespace accel
