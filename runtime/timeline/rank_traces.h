// The ranks' timeline files (collective/timeline.h writes one per rank) read back and merged into one
// Chrome trace, with one process per rank and one track per thread, for Perfetto or chrome://tracing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace accel {

struct RankTrace {
  int rank = 0;
  int world_size = 1;  // as the rank knew it
  std::string host;
  size_t dropped_events = 0;
  nlohmann::json events;  // the file's traceEvents
};

// Every DIR/accel_trace_rank<R>.json, by rank. Throws accel::Error when there is none or a file is not
// an accel timeline, or when the files disagree on the world size. A missing rank (one that died
// before writing) is not an error: each gets a line in notes.
std::vector<RankTrace> read_rank_traces(const std::string& dir, std::vector<std::string>& notes);

// One trace of all the ranks' events.
nlohmann::json merge_rank_traces(const std::vector<RankTrace>& ranks);

}  // namespace accel
