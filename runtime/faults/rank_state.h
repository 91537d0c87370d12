// RankState: what one rank is doing with its collectives, from its ledgers: per communicator the
// last seq, the collective it waits in (if any) and the last one it finished. Ranks exchange these
// as JSON files when a collective stalls, so the report can say who waits where.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "collective/ledger.h"

namespace accel {

struct CommunicatorState {
  std::string name;
  uint64_t last_seq = 0;
  std::optional<LedgerEntry> running;        // the oldest collective that has not finished
  std::optional<LedgerEntry> last_finished;  // the newest that has
};

struct RankState {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string activity = "running";  // or "exiting": it is leaving the program (exit, return from main)
  std::vector<CommunicatorState> communicators;

  const CommunicatorState* find(const std::string& name) const;
  nlohmann::json to_json() const;
  // Throws accel::Error naming the field when the JSON is not a RankState.
  static RankState from_json(const nlohmann::json& j);
};

// This process's state now, from every live ledger (and, when it is exiting, the retired ones too:
// an Accelerator's communicators are gone before the process ends).
RankState capture_rank_state(int rank, const std::string& activity);

// The stall report: a heading, then one line per group of ranks, for the collective `seq` on
// communicator `comm` that `reporter` has waited in for waited_s. ranks[r] is rank r's state, or
// nullopt when it sent none.
std::string stall_report(int reporter, const std::string& comm, const LedgerEntry& stalled, double waited_s,
                         const std::vector<std::optional<RankState>>& ranks);

}  // namespace accel
