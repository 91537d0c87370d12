// The differentiable collectives of tensor parallelism (Megatron-LM's mappings): each is a
// collective in one direction of the graph and its adjoint in the other, so a parallel layer is an
// ordinary composition of ops with these at the borders of its parallel region.
#pragma once

#include "collective/communicator.h"
#include "tensor/tensor.h"

namespace accel::nn::parallel {

// Every function takes the tensor-parallel group's communicator, which must outlive the graph: the
// backward of each runs its collective on it. Every rank of the group calls them in the same order,
// with tensors on the communicator's device. On a group of one rank they move nothing.
//
// "Replicated" means every rank holds the same value; "per rank" that each holds its own part.

// Megatron's f, at the entry of a parallel region: identity forward on a replicated x; backward sums
// the grads of every rank's use of x (one all-reduce), so each rank gets the grad of the replicated x.
Tensor copy_to_tp_region(const Tensor& x, Communicator& tp);

// Megatron's g, at the exit: forward sums the per-rank partial results (one all-reduce) into a
// replicated tensor; backward is the identity, since every rank already holds the replicated grad.
Tensor reduce_from_tp_region(const Tensor& x, Communicator& tp);

// Per-rank [..., d] to replicated [..., tp.size() * d], rank r's part at columns [r d, (r + 1) d) of the
// last dim (one all-gather); backward keeps this rank's columns of the grad.
Tensor gather_from_tp_region(const Tensor& x, Communicator& tp);

// Replicated [..., n] to this rank's columns [r n / size, (r + 1) n / size) of the last dim, n a multiple
// of tp.size(); backward all-gathers the grads of the parts back into [..., n].
Tensor scatter_to_tp_region(const Tensor& x, Communicator& tp);

}  // namespace accel::nn::parallel
