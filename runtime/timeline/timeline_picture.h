// A picture of one optimizer step from the ranks' timelines, as SVG: a row per rank and thread, a row
// per rank for its collectives, on one time axis. docs/debugging.md shows one made this way.
#pragma once

#include <string>
#include <vector>

#include "runtime/timeline/rank_traces.h"

namespace accel {

struct TimelinePictureOptions {
  // Which optimizer step (0-based, as rank 0 counts its optimizer-step spans); -1: the last one.
  int step = -1;
  int width_px = 1200;
};

// Throws accel::Error if rank 0 took no such step.
std::string timeline_svg(const std::vector<RankTrace>& traces, const TimelinePictureOptions& options = {});

}  // namespace accel
