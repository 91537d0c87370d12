// Checks a merged timeline (accel trace merge's output) of a data-parallel run: it parses; every rank
// in 0..N-1 has a process; on every thread the spans nest (each one ends before the next begins, or
// contains it); every async slice ends, after it began; each rank has forward, backward, optimizer-step
// and data-loading spans; and on each rank a gradient collective overlaps a backward span (it was
// sent while backward still ran). Usage: timeline_checker MERGED.json RANKS. Exit 0 when all hold.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  fmt::print("{} {}\n", ok ? "   ok:" : "   FAILED:", what);
  failures += ok ? 0 : 1;
}

struct Interval {
  double begin, end;
  std::string name;
};

// The first pair of spans on one thread that overlap without nesting, or "".
std::string crossing(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end(), [](const Interval& a, const Interval& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<Interval> open;
  for (const Interval& s : spans) {
    while (!open.empty() && open.back().end <= s.begin) open.pop_back();
    if (!open.empty() && s.end > open.back().end)
      return fmt::format("{} [{}, {}] and {} [{}, {}]", open.back().name, open.back().begin, open.back().end, s.name,
                         s.begin, s.end);
    open.push_back(s);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: timeline_checker MERGED.json RANKS\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
  check(!trace.is_discarded() && trace.contains("traceEvents"), "the merged trace parses, with traceEvents");
  if (trace.is_discarded()) return 1;
  const int ranks = std::stoi(argv[2]);

  std::set<int> processes;
  std::map<std::pair<int, int>, std::vector<Interval>> threads;
  std::map<int, std::map<std::string, std::vector<Interval>>> spans_by_rank;
  std::map<std::pair<int, std::string>, double> open_slices;
  std::map<int, std::vector<Interval>> gradient_slices;
  int unmatched = 0, backwards_in_time = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", -1);
    if (ph == "M" && e.value("name", "") == "process_name") processes.insert(pid);
    if (ph == "X") {
      const Interval s{e.value("ts", 0.0), e.value("ts", 0.0) + e.value("dur", 0.0), e.value("name", "")};
      threads[{pid, e.value("tid", 0)}].push_back(s);
      spans_by_rank[pid][s.name].push_back(s);
    }
    if (ph == "b") open_slices[{pid, e["id2"].value("local", "")}] = e.value("ts", 0.0);
    if (ph == "e") {
      const auto it = open_slices.find({pid, e["id2"].value("local", "")});
      if (it == open_slices.end()) {
        ++unmatched;
        continue;
      }
      if (e.value("ts", 0.0) < it->second) ++backwards_in_time;
      if (e.value("cat", "") == "gradient") gradient_slices[pid].push_back({it->second, e.value("ts", 0.0), e.value("name", "")});
      open_slices.erase(it);
    }
  }
  for (int r = 0; r < ranks; ++r) check(processes.count(r) == 1, fmt::format("rank {} has a process in the trace", r));
  check(static_cast<int>(processes.size()) == ranks, fmt::format("exactly {} processes", ranks));
  for (const auto& [where, spans] : threads) {
    const std::string bad = crossing(spans);
    check(bad.empty(), fmt::format("rank {} thread {}: its {} spans nest{}", where.first, where.second, spans.size(),
                                   bad.empty() ? "" : " (not: " + bad + ")"));
  }
  check(unmatched == 0 && open_slices.empty(), fmt::format("every async slice begins and ends ({} ends without a "
                                                           "begin, {} begins without an end)",
                                                           unmatched, open_slices.size()));
  check(backwards_in_time == 0, "every slice ends after it begins");
  for (int r = 0; r < ranks; ++r) {
    for (const char* name : {"forward", "backward", "optimizer step", "data loading"})
      check(!spans_by_rank[r][name].empty(), fmt::format("rank {} has {} '{}' spans", r, spans_by_rank[r][name].size(), name));
    int overlapping = 0;
    for (const Interval& g : gradient_slices[r])
      for (const Interval& b : spans_by_rank[r]["backward"])
        if (g.begin < b.end && g.end > b.begin && g.begin >= b.begin) ++overlapping;
    check(overlapping > 0, fmt::format("rank {}: {} of its {} gradient all-reduces began while backward ran", r,
                                       overlapping, gradient_slices[r].size()));
  }
  return failures == 0 ? 0 : 1;
}
