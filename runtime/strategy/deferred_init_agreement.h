// How a sharding strategy starts every rank from the same deferred-init model: nothing is broadcast
// for meta parameters (each rank materialises its own slice from its recipe), so instead the ranks
// check that their recipes agree, which the same model built from the same seed guarantees.
#pragma once

#include <string>

#include "collective/communicator.h"
#include "nn/module.h"

namespace accel {

// The entries that are not meta tensors: the ones rank 0's values can be broadcast for.
nn::StateDict materialised_entries(const nn::StateDict& entries);
// Collective (one all-gather of a fingerprint per rank): throws on every rank, naming the ranks and
// who, when some rank's entries differ from rank 0's in their names, in which are meta, or in a meta
// entry's recorded initialisers (regions, formulas, Philox positions).
void check_deferred_init_agrees(const nn::StateDict& entries, Communicator& comm, const std::string& who);

}  // namespace accel
