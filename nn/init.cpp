// In-place initialisers: draw in the tensor's dtype and device, then copy into it under no-grad.
#include "nn/init.h"

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel::nn::init {

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  NoGradGuard no_grad;
  nograd::copy_(t, uniform(t.shape(), low, high, gen, t.dtype(), t.device()));
}

void normal_(const Tensor& t, double mean, double std, Generator& gen) {
  NoGradGuard no_grad;
  nograd::copy_(t, nograd::add(nograd::mul(randn(t.shape(), gen, t.dtype(), t.device()), std), mean));
}

void zeros_(const Tensor& t) {
  NoGradGuard no_grad;
  nograd::zero_(t);
}

void ones_(const Tensor& t) {
  NoGradGuard no_grad;
  nograd::fill_(t, 1.0);
}

}  // namespace accel::nn::init
