// Differentiable matmul: grad_a = g @ b^T and grad_b = a^T @ g, summed back over broadcast batch
// dims, with 1-d operands lifted to matrices as in the forward.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

Tensor mT(const Tensor& t) { return nograd::transpose(t, -2, -1); }

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  // Under autocast both operands run in the compute dtype; the casts' nodes carry grads back.
  const Tensor a = autocast::to_compute(a_in), b = autocast::to_compute(b_in);
  Tensor out = nograd::matmul(a, b);
  record("MatmulBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Grads& g) -> Grads {
           // Lift vectors and the grad to the [..., M, K] x [..., K, N] -> [..., M, N] form of the forward.
           const Tensor a2 = a.dim() == 1 ? nograd::unsqueeze(a, 0) : a;
           const Tensor b2 = b.dim() == 1 ? nograd::unsqueeze(b, 1) : b;
           Tensor g2 = g[0];
           if (b.dim() == 1) g2 = nograd::unsqueeze(g2, g2.dim());
           if (a.dim() == 1) g2 = nograd::unsqueeze(g2, g2.dim() - 1);
           Tensor ga, gb;
           if (need_a) ga = nograd::reshape(nograd::sum_to_shape(nograd::matmul(g2, mT(b2)), a2.shape()), a.shape());
           if (need_b) {
             if (b2.dim() == 2 && a2.dim() > 2) {
               // A weight shared by a batch of inputs: sum over the batch inside one GEMM,
               // [K, B*M] x [B*M, N], instead of B products and a reduction.
               const int64_t rows = shape_numel(Shape(a2.shape().begin(), a2.shape().end() - 1));
               gb = nograd::matmul(mT(nograd::reshape(a2, {rows, a2.size(-1)})), nograd::reshape(g2, {rows, b2.size(-1)}));
             } else {
               gb = nograd::sum_to_shape(nograd::matmul(mT(a2), g2), b2.shape());
             }
             gb = nograd::reshape(gb, b.shape());
           }
           return {ga, gb};
         });
  return out;
}

}  // namespace accel
