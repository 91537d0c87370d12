// Differentiable matmul: grad_a = g @ b^T and grad_b = a^T @ g, summed back over broadcast batch
// dims, with 1-d operands lifted to matrices as in the forward.
#include <algorithm>
#include <numeric>

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

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// The batch dims of the product (sizes `batch`) that an operand with batch dims `own` was broadcast
// over: missing from it, or 1 in it where the product has more.
std::vector<bool> broadcast_dims(const Shape& batch, const Shape& own) {
  std::vector<bool> reduced(batch.size());
  const size_t lead = batch.size() - own.size();
  for (size_t d = 0; d < batch.size(); ++d) reduced[d] = batch[d] > 1 && (d < lead || own[d - lead] == 1);
  return reduced;
}

// sum over the `reduced` batch dims of lhs[b] @ rhs[b], for lhs [batch..., M, J] and rhs
// [batch..., J, N]: the reduced dims are moved next to J and merged with it, so one GEMM per kept
// batch entry sums over them in its own accumulator ([..., M, R*J] x [..., R*J, N]). For f16/bf16
// that is f32, rounded once, where summing per-entry products would round each of them to 16 bits.
Tensor batch_reduced_matmul(const Tensor& lhs, const Tensor& rhs, const std::vector<bool>& reduced) {
  const int64_t nb = static_cast<int64_t>(reduced.size());
  std::vector<int64_t> kept_dims, reduced_dims;
  for (int64_t d = 0; d < nb; ++d) (reduced[d] ? reduced_dims : kept_dims).push_back(d);
  Shape kept_sizes;
  int64_t r = 1;
  for (int64_t d : kept_dims) kept_sizes.push_back(lhs.size(d));
  for (int64_t d : reduced_dims) r *= lhs.size(d);
  const int64_t m = lhs.size(-2), j = lhs.size(-1), n = rhs.size(-1);
  // lhs -> [kept..., M, reduced..., J] -> [kept..., M, R*J]
  std::vector<int64_t> perm_l = kept_dims;
  perm_l.push_back(nb);
  perm_l.insert(perm_l.end(), reduced_dims.begin(), reduced_dims.end());
  perm_l.push_back(nb + 1);
  Shape shape_l = kept_sizes;
  shape_l.insert(shape_l.end(), {m, r * j});
  // rhs -> [kept..., reduced..., J, N] -> [kept..., R*J, N]
  std::vector<int64_t> perm_r = kept_dims;
  perm_r.insert(perm_r.end(), reduced_dims.begin(), reduced_dims.end());
  perm_r.insert(perm_r.end(), {nb, nb + 1});
  Shape shape_r = kept_sizes;
  shape_r.insert(shape_r.end(), {r * j, n});
  return nograd::matmul(nograd::reshape(nograd::permute(lhs, perm_l), shape_l),
                        nograd::reshape(nograd::permute(rhs, perm_r), shape_r));
}

// The grad of operand `op` (its lifted shape) from the product of lhs and rhs, each [batch..., *, *]
// with the product's batch dims: summed over the batch dims op was broadcast over.
Tensor operand_grad(const Tensor& lhs, const Tensor& rhs, const Tensor& op) {
  const Shape batch = batch_of(lhs);
  const std::vector<bool> reduced = broadcast_dims(batch, batch_of(op));
  if (std::none_of(reduced.begin(), reduced.end(), [](bool b) { return b; }))
    return nograd::sum_to_shape(nograd::matmul(lhs, rhs), op.shape());
  return nograd::reshape(batch_reduced_matmul(lhs, rhs, reduced), op.shape());
}

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.insert(batch.end(), {rows, cols});
  return batch;
}

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
           // Halves sum over broadcast batch dims inside the GEMM (operand_grad), in f32; f32 and f64
           // sum per-entry products, except for the common weight shared by a batch of inputs.
           const bool half = is_low_precision(a.dtype());
           const Shape batch = batch_of(g2);
           Tensor ga, gb;
           if (need_a) {
             if (half) {
               const Tensor bf = nograd::expand(b2, with_matrix(batch, b2.size(-2), b2.size(-1)));
               ga = operand_grad(g2, mT(bf), a2);
             } else {
               ga = nograd::sum_to_shape(nograd::matmul(g2, mT(b2)), a2.shape());
             }
             ga = nograd::reshape(ga, a.shape());
           }
           if (need_b) {
             if (half || (b2.dim() == 2 && a2.dim() > 2)) {
               // For a 2-d weight this is [K, B*M] x [B*M, N]: the batch summed inside one GEMM,
               // instead of B products and a reduction.
               const Tensor af = nograd::expand(a2, with_matrix(batch, a2.size(-2), a2.size(-1)));
               gb = operand_grad(mT(af), g2, b2);
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
