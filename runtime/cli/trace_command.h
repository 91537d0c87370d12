// `accel trace merge DIR OUT.json [--svg FILE] [--svg_step N]`: the ranks' timeline files in DIR as one
// Chrome trace (Perfetto, chrome://tracing), the straggler summary, and optionally a picture of a step.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <string>

namespace accel {

struct TraceMergeRequest {
  std::string dir, out, svg;
  int svg_step = -1;
};

// Writes the merged trace (and the picture), and prints the notes (missing ranks, dropped events) and
// the straggler summary to out. Throws accel::Error on a missing or bad file.
void merge_trace_dir(const TraceMergeRequest& request, std::ostream& out);

class TraceCommand {
 public:
  explicit TraceCommand(CLI::App& app);
  bool selected() const { return trace_ != nullptr && trace_->parsed(); }
  int run(std::ostream& out) const;

 private:
  CLI::App* trace_ = nullptr;
  CLI::App* merge_ = nullptr;
  TraceMergeRequest request_;
};

}  // namespace accel
