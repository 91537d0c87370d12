// Activation modules: each forwards to its differentiable op.
#include "nn/activation.h"

#include "autograd/functions.h"

namespace accel::nn {

Tensor ReLU::forward_impl(const Tensor& x) { return relu(x); }
Tensor GELU::forward_impl(const Tensor& x) { return gelu(x); }
Tensor Tanh::forward_impl(const Tensor& x) { return tanh(x); }

}  // namespace accel::nn
