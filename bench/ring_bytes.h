// The bytes a rank puts on the wire for the collectives a ledger recorded, as a ring algorithm sends
// them: an all-reduce 2(N-1)/N of its elements, a reduce-scatter or all-gather N-1 times the shard
// (what their ledger entries count), a broadcast its elements (an upper bound). Shared by the benches
// that compare measured traffic with theory.
#pragma once

#include <map>

#include "collective/ledger.h"

namespace ring {

inline double bytes_of(const accel::LedgerEntry& e, int n) {
  const double elems = static_cast<double>(e.count) * static_cast<double>(accel::dtype_size(e.dtype));
  const double share = static_cast<double>(n - 1) / n;
  if (e.op == "all_reduce") return 2 * share * elems;
  if (e.op == "reduce_scatter" || e.op == "all_gather") return static_cast<double>(n - 1) * elems;
  if (e.op == "broadcast") return elems;
  return 0;
}

// Marks of where each ledger stood, so that a bench counts only what ran since.
using Marks = std::map<const accel::CollectiveLedger*, uint64_t>;

// The sum of bytes_of over every live ledger's entries above the marks, each ledger's group taken to
// have size_of(ledger) ranks; then new marks.
template <class SizeOf>
double bytes_since(Marks& marks, SizeOf size_of) {
  double bytes = 0;
  for (const auto& ledger : accel::live_ledgers()) {
    uint64_t& mark = marks[ledger.get()];
    for (const accel::LedgerEntry& e : ledger->entries())
      if (e.seq > mark) bytes += bytes_of(e, size_of(*ledger));
    mark = ledger->last_seq();
  }
  return bytes;
}

}  // namespace ring
