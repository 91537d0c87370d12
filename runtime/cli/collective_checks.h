// The collective part of `accel test`: every operation of a Communicator on every dtype, compared
// element by element with values worked out here, not by the library's reduction code.
#pragma once

#include "runtime/cli/check_list.h"

namespace accel {

class Communicator;

// all_reduce (sum, avg, max, min; in place and out of place), reduce_scatter (both forms),
// all_gather (both forms), broadcast, gather, send/recv around the ring of ranks, barrier, and async
// operations in flight together, at sizes that the rank count does not divide. Collective: every rank
// calls it with the same kind of communicator. Each check is named "<backend> <op> <dtype> n=<size>".
void check_collectives(Communicator& comm, CheckList& checks);

}  // namespace accel
