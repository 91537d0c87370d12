// Differentiable linear: the forward is one GEMM with the bias folded in; the backward is two GEMMs
// that produce the input and weight grads in their own layouts, and a sum over rows for the bias.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  // Under autocast the GEMM runs in the compute dtype; a registered master weight comes as its copy.
  const Tensor x = autocast::to_compute(x_in), weight = autocast::to_compute(weight_in),
               bias = autocast::to_compute(bias_in);
  Tensor out = nograd::linear(x, weight, bias);
  record("LinearBackward", {x, weight, bias}, {out},
         [x = detach(x), weight = detach(weight), need_x = x.requires_grad(), need_weight = weight.requires_grad(),
          need_bias = bias.defined() && bias.requires_grad()](const Grads& g) -> Grads {
           const int64_t in = weight.size(1), out_features = weight.size(0);
           const Tensor g2 = nograd::reshape(g[0], {-1, out_features});  // [rows, out]
           Tensor gx, gw, gb;
           if (need_x) gx = nograd::reshape(nograd::matmul(g2, weight), x.shape());  // [rows, out] x [out, in]
           // [out, rows] x [rows, in]: the grad comes out [out, in] like the weight, with no transpose.
           if (need_weight) gw = nograd::matmul(nograd::transpose(g2, 0, 1), nograd::reshape(x, {-1, in}));
           if (need_bias) gb = nograd::sum(g2, {0});
           return {gx, gw, gb};
         });
  return out;
}

}  // namespace accel
