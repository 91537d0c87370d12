// The exact check behind #wrong: every rank fills its inputs with small integers that it can compute
// for any rank, so each rank knows every element of its expected output exactly, in every dtype.
#pragma once

#include <cstdint>

#include "bench/lib/collective_kind.h"
#include "collective/reduce_op.h"
#include "tensor/tensor.h"

namespace accel::bench {

// One checked call, as seen from one rank.
struct CheckCase {
  CollectiveKind kind = CollectiveKind::all_reduce;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;  // used by all-reduce and reduce-scatter only
  int ranks = 1;
  int rank = 0;
  int root = 0;  // used by broadcast only
};

// Rank r's element i: an integer in [-2, 2] in a scrambled order that repeats every 1021 elements
// (a prime, so no power-of-two chunking lines up with it) and differs between ranks, so a chunk
// moved to the wrong place or taken from the wrong rank shows up as wrong elements.
int input_value(int rank, int64_t i);

// Throws accel::Error when sums over `ranks` ranks of input_value could round in dtype, i.e. when
// 2 * ranks exceeds the largest integer up to which dtype is exact (256 for bf16, 2048 for f16).
void check_exact(DType dtype, int ranks);

// Writes what this rank's input buffer holds before the call: its input_value row (for broadcast,
// root's row on root and poison elsewhere, since non-roots receive into the same buffer). t is
// contiguous on the CPU; for in-place all-gather pass this rank's slot of the output.
void fill_input(const CheckCase& c, const Tensor& t);
// Overwrites t with a value no correct result can hold (NaN for floats, the dtype's minimum for
// integers), so that an output element the collective never wrote counts as wrong.
void poison(const Tensor& t);
// How many elements of result differ from this rank's exact expected output: the reduction over all
// ranks (all-reduce; the rank's own part of it for reduce-scatter), every rank's input in rank order
// (all-gather), or root's input (broadcast). result is contiguous on the CPU and has the output's
// element count; avg is the sum divided once, as the backends do (halves in f32, integers truncating).
int64_t count_wrong(const CheckCase& c, const Tensor& result);

}  // namespace accel::bench
