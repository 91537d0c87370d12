// Shared pieces of the tensor-parallel tests: the world communicator, a gradcheck across the ranks of
// a group, the gathering of a sharded tensor back into its full form, and comparisons of tensors.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>

#include "../zero/counting_communicator.h"
#include "accel.h"

namespace test {

using namespace accel;

// A communicator over MPI_COMM_WORLD that main() keeps for the run.
std::shared_ptr<Communicator>& world();

// The tensor-parallel groups a test runs on: the whole world, and on 4 ranks also the tp dimension of
// a {dp: 2, tp: 2} mesh (groups {0, 1} and {2, 3}), so that the layers work on a sub-group. Built
// collectively on world(), in the same order on every rank.
struct TpGroups {
  TpGroups();
  std::unique_ptr<Communicator> whole;
  std::unique_ptr<DeviceMesh> mesh;  // null unless the world has 4 ranks
  std::vector<Communicator*> all;
};

// How a tensor lies over a tensor-parallel group: every rank holds the same value, or each its own.
enum class Spread { replicated, per_rank };

// Finite differences in f64 against backward for a function whose forward and backward communicate
// over tp. x (f64) is replicated or per rank as `input` says; f's output is too, as `output` says.
// The scalar checked is the one the group's math defines: with a per-rank output each rank weights its
// output with its own random w and the objective is the sum over the ranks; a replicated output feeds
// computation that every rank repeats, so the objective is the one w (the same on every rank) times it.
// A replicated x is perturbed on every rank at once (it is one value); a per-rank x on its own rank
// only. Every rank of tp must call it with the same sizes. Returns "" or what differs on this rank.
std::string tp_gradcheck(const std::function<Tensor(const Tensor&)>& f, Communicator& tp, const Tensor& x,
                         Spread input, Spread output, uint64_t seed = 7);

// The per-rank parts of a tensor joined along dim in rank order (an all-gather on comm), as a new
// tensor: the full form of a tensor split on dim.
Tensor gather_along(const Tensor& part, int64_t dim, Communicator& comm);

// Every rank's part of a parameter split as `split` says, joined into the full tensor (an all-gather
// on comm, then nn::parallel::join_parts).
Tensor gather_full(const Tensor& part, const nn::parallel::TensorSplit& split, Communicator& comm);

// "" when a and b have the same shape and max |a - b| <= rtol * max |b| (relative to b's largest
// element), else the shapes or the worst element.
std::string differs(const Tensor& a, const Tensor& b, double rtol = 1e-5);
// The same relative to a given scale (a whole model's largest value): for tensors whose own values
// are all near zero, such as the grads of zero-initialised biases.
std::string differs_at_scale(const Tensor& a, const Tensor& b, double scale, double rtol = 1e-5);
// max |t| in f64.
double max_abs(const Tensor& t);

// How many collectives of any kind c counted since its last reset.
int collectives_run(const CountingCommunicator& c);

// "" when every rank of comm holds exactly the same t (bitwise), else which rank differs from rank 0.
std::string differs_across_ranks(const Tensor& t, Communicator& comm);

}  // namespace test
