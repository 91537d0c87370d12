// accel trace merge: read back, merge, summarise, draw.
#include "runtime/cli/trace_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "kernels/error.h"
#include "runtime/timeline/rank_traces.h"
#include "runtime/timeline/straggler_summary.h"
#include "runtime/timeline/timeline_picture.h"

namespace accel {

namespace {
void write_file(const std::string& path, const std::string& text) {
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file);
  out << text;
  if (!out) throw Error(fmt::format("accel trace merge: could not write {}", path));
}
}  // namespace

void merge_trace_dir(const TraceMergeRequest& request, std::ostream& out) {
  std::vector<std::string> notes;
  const std::vector<RankTrace> ranks = read_rank_traces(request.dir, notes);
  write_file(request.out, merge_rank_traces(ranks).dump() + "\n");
  out << fmt::format("accel trace merge: {} rank(s) from {} -> {} (open it in https://ui.perfetto.dev or "
                     "chrome://tracing)\n",
                     ranks.size(), request.dir, request.out);
  for (const std::string& note : notes) out << "note: " << note << "\n";
  if (!request.svg.empty()) {
    write_file(request.svg, timeline_svg(ranks, {.step = request.svg_step}));
    out << fmt::format("picture of a step: {}\n", request.svg);
  }
  out << straggler_summary(ranks).text();
}

TraceCommand::TraceCommand(CLI::App& app) {
  trace_ = app.add_subcommand("trace", "Work with the timelines that ACCEL_TRACE=DIR (or launch --trace DIR) records");
  trace_->require_subcommand(1);
  merge_ = trace_->add_subcommand(
      "merge", "Merge DIR's per-rank timelines into one Chrome trace, and print the straggler summary");
  merge_->add_option("dir", request_.dir, "Directory of accel_trace_rank<R>.json files")->required();
  merge_->add_option("out", request_.out, "The merged trace to write (JSON)")->required();
  merge_->add_option("--svg", request_.svg, "Also draw one optimizer step of every rank as an SVG picture");
  merge_->add_option("--svg_step", request_.svg_step, "Which step to draw (0-based, rank 0's count; default the last)");
}

int TraceCommand::run(std::ostream& out) const {
  merge_trace_dir(request_, out);
  return 0;
}

}  // namespace accel
