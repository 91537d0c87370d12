// Reading the per-rank timeline files and concatenating their events: each file already names its
// process (pid = rank) and its threads, and its async ids are process-local, so nothing is renumbered.
#include "runtime/timeline/rank_traces.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kernels/error.h"

namespace accel {

namespace {

RankTrace read_one(const std::filesystem::path& path, int rank_in_name) {
  std::ifstream in(path);
  nlohmann::json file = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return Error(fmt::format("read_rank_traces: {} is not an accel timeline: {}", path.string(), why));
  };
  if (file.is_discarded()) throw bad("it does not parse as JSON (was its rank killed while writing?)");
  if (!file.is_object() || !file.contains("traceEvents") || !file["traceEvents"].is_array() ||
      !file.contains("otherData") || !file["otherData"].is_object())
    throw bad("expected an object with traceEvents and otherData");
  const nlohmann::json& other = file["otherData"];
  if (other.value("format", "") != "accel timeline 1") throw bad("otherData.format is not 'accel timeline 1'");
  RankTrace trace;
  trace.rank = other.value("rank", -1);
  if (trace.rank != rank_in_name)
    throw bad(fmt::format("otherData.rank is {} but the file name says rank {}", trace.rank, rank_in_name));
  trace.host = other.value("host", "");
  trace.world_size = other.value("world_size", 0);
  if (trace.world_size <= trace.rank) throw bad(fmt::format("otherData.world_size {} does not hold rank {}", trace.world_size, trace.rank));
  trace.dropped_events = other.value("dropped_events", size_t{0});
  trace.events = std::move(file["traceEvents"]);
  return trace;
}

// The R of "accel_trace_rank<R>.json", or -1 for any other name.
int rank_in_file_name(const std::string& name) {
  const std::string prefix = "accel_trace_rank", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.size() > prefix.size() + suffix.size() + 7 ||
      name.compare(0, prefix.size(), prefix) != 0 || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoi(digits);
}

}  // namespace

std::vector<RankTrace> read_rank_traces(const std::string& dir, std::vector<std::string>& notes) {
  if (!std::filesystem::is_directory(dir))
    throw Error(fmt::format("read_rank_traces: '{}' is not a directory", dir));
  std::vector<RankTrace> ranks;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (const int rank = rank_in_file_name(entry.path().filename().string()); rank >= 0)
      ranks.push_back(read_one(entry.path(), rank));
  if (ranks.empty())
    throw Error(fmt::format("read_rank_traces: no accel_trace_rank<R>.json in '{}'; run with ACCEL_TRACE={} "
                            "(or accel launch --trace {}) first",
                            dir, dir, dir));
  std::sort(ranks.begin(), ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].rank == ranks[i - 1].rank)
      throw Error(fmt::format("read_rank_traces: two files in '{}' hold rank {}", dir, ranks[i].rank));
  for (const RankTrace& t : ranks)
    if (t.world_size != ranks[0].world_size)
      throw Error(fmt::format("read_rank_traces: in '{}' rank {} ran with {} ranks but rank {} with {}; are two runs' "
                              "files mixed?",
                              dir, ranks[0].rank, ranks[0].world_size, t.rank, t.world_size));
  for (int r = 0, i = 0; r < ranks[0].world_size; ++r) {
    if (static_cast<size_t>(i) < ranks.size() && ranks[static_cast<size_t>(i)].rank == r) ++i;
    else notes.push_back(fmt::format("rank {} left no timeline file in {} (did it fail before its Accelerator ended?)", r, dir));
  }
  for (const RankTrace& t : ranks)
    if (t.dropped_events > 0)
      notes.push_back(fmt::format("rank {} dropped {} events past ACCEL_TRACE_MAX_EVENTS", t.rank, t.dropped_events));
  return ranks;
}

nlohmann::json merge_rank_traces(const std::vector<RankTrace>& ranks) {
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json hosts = nlohmann::json::object();
  for (const RankTrace& t : ranks) {
    for (const nlohmann::json& e : t.events) events.push_back(e);
    hosts[std::to_string(t.rank)] = t.host;
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"format", "accel merged timeline 1"}, {"ranks", ranks.size()}, {"hosts", std::move(hosts)}}}};
}

}  // namespace accel
