// nn::Dropout: the training-mode switch around the dropout op.
#include "nn/dropout.h"

#include <fmt/format.h>

#include "autograd/functions.h"

namespace accel::nn {

Dropout::Dropout(double p, Generator& gen) : p_(p), gen_(gen.next_seed()) {
  if (!(p >= 0.0 && p < 1.0)) throw Error(fmt::format("Dropout: p must be in [0, 1), got {}", p));
}

Tensor Dropout::forward_impl(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, gen_);
}

}  // namespace accel::nn
