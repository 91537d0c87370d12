// predivide_for_average: f16 grads scaled by 1/N before their sum across ranks.
#include "runtime/strategy/grad_average.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

ReduceOp predivide_for_average(const Tensor& wire, int ranks) {
  if (ranks < 1) throw Error(fmt::format("predivide_for_average: ranks must be >= 1, got {}", ranks));
  if (wire.dtype() != DType::f16) return ReduceOp::avg;
  NoGradGuard no_grad;
  if (ranks > 1) nograd::mul_(wire, 1.0 / ranks);
  return ReduceOp::sum;
}

}  // namespace accel
