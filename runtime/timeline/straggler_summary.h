// The straggler summary of a timeline: per rank, the compute time of each optimizer step before its
// first gradient collective (from the step's first forward to the first reducer bucket or ZeRO
// reduce-scatter it sends), and the rank that is slowest there: the one the others wait for.
#pragma once

#include <string>
#include <vector>

#include "runtime/timeline/rank_traces.h"

namespace accel {

struct RankCompute {
  int rank = 0;
  std::string host;
  int steps = 0;  // optimizer steps with a forward and a gradient collective
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

struct StragglerSummary {
  std::vector<RankCompute> ranks;  // the ranks that have steps
  int slowest = -1;                // index into ranks; -1 with no steps (one process: no gradient sync)
  // A small table and a last line that names the slowest rank, or why there is no summary.
  std::string text() const;
};

StragglerSummary straggler_summary(const std::vector<RankTrace>& traces);

}  // namespace accel
