// Reading the ranks' timeline files back (runtime/timeline/): the files are found by name and checked,
// a missing rank is a note rather than an error, the merge keeps every event under its rank, the
// straggler summary measures each step from its first forward to its first gradient collective and
// names the slowest rank, and the picture draws a step of every rank.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/timeline/rank_traces.h"
#include "runtime/timeline/straggler_summary.h"
#include "runtime/timeline/timeline_picture.h"

using namespace accel;
using nlohmann::json;

namespace {

struct Dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / fmt::format("accel-timeline-files-{}", getpid());
  Dir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

json span(int rank, const char* name, double ts, double dur) {
  return {{"ph", "X"}, {"name", name}, {"cat", "compute"}, {"pid", rank}, {"tid", 1}, {"ts", ts}, {"dur", dur}};
}

void add_collective(json& events, int rank, const char* cat, double begin, double end, int id) {
  const json id2 = {{"local", fmt::format("0x{:x}", id)}};
  events.push_back({{"ph", "b"}, {"name", "all_reduce reducer bucket 0"}, {"cat", cat}, {"id2", id2}, {"pid", rank},
                    {"tid", 1}, {"ts", begin}, {"args", json::object()}});
  events.push_back({{"ph", "e"}, {"name", "all_reduce reducer bucket 0"}, {"cat", cat}, {"id2", id2}, {"pid", rank},
                    {"tid", 1}, {"ts", end}});
}

// Steps of 1000 us: forward at +100, backward, the rank's first gradient collective at +100 + compute,
// a plain collective before it (which must not count), and an optimizer step ending at +1000.
void write_rank(const std::filesystem::path& dir, int rank, const std::vector<double>& compute_us, int world_size = 4) {
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "main"}}}});
  for (size_t s = 0; s < compute_us.size(); ++s) {
    const double t0 = 1000.0 * static_cast<double>(s);
    events.push_back(span(rank, "forward", t0 + 100, 50));
    events.push_back(span(rank, "backward", t0 + 150, compute_us[s]));
    add_collective(events, rank, "collective", t0 + 120, t0 + 130, static_cast<int>(2 * s));
    add_collective(events, rank, "gradient", t0 + 100 + compute_us[s], t0 + 900, static_cast<int>(2 * s + 1));
    events.push_back(span(rank, "optimizer step", t0 + 920, 80));
  }
  const json file = {{"traceEvents", events},
                     {"otherData", {{"format", "accel timeline 1"}, {"rank", rank}, {"world_size", world_size}, {"host", "h"}, {"dropped_events", 0}}}};
  std::ofstream(dir / fmt::format("accel_trace_rank{}.json", rank)) << file.dump();
}

}  // namespace

TEST_CASE("timeline files: merged by rank, a missing rank noted, the slowest rank named") {
  Dir dir;
  write_rank(dir.path, 0, {200, 300, 250});
  write_rank(dir.path, 2, {400, 500, 450});
  std::ofstream(dir.path / "unrelated.json") << "{}";
  std::vector<std::string> notes;
  const std::vector<RankTrace> ranks = read_rank_traces(dir.path.string(), notes);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[1].rank == 2);
  REQUIRE(notes.size() == 2);  // of 4 ranks
  CHECK(notes[0].find("rank 1 left no timeline file") != std::string::npos);
  CHECK(notes[1].find("rank 3 left no timeline file") != std::string::npos);

  const json merged = merge_rank_traces(ranks);
  CHECK(merged["otherData"]["format"] == "accel merged timeline 1");
  CHECK(merged["traceEvents"].size() == ranks[0].events.size() + ranks[1].events.size());

  const StragglerSummary s = straggler_summary(ranks);
  REQUIRE(s.ranks.size() == 2);
  CHECK(s.ranks[0].steps == 3);
  CHECK(s.ranks[0].median_ms == doctest::Approx(0.25));
  CHECK(s.ranks[0].min_ms == doctest::Approx(0.2));
  CHECK(s.ranks[0].max_ms == doctest::Approx(0.3));
  CHECK(s.ranks[1].median_ms == doctest::Approx(0.45));
  REQUIRE(s.slowest == 1);
  const std::string text = s.text();
  CHECK(text.find("slowest: rank 2 (h), 0.450 ms median, 80 % above the fastest, rank 0") != std::string::npos);

  const std::string svg = timeline_svg(ranks, {.step = 1});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("rank 0 main") != std::string::npos);
  CHECK(svg.find("rank 2 collectives") != std::string::npos);
  CHECK(svg.find("<title>backward (0.300 ms)</title>") != std::string::npos);  // step 1 of rank 0
  CHECK(svg.find("<title>backward (0.200 ms)</title>") == std::string::npos);  // step 0 is not drawn
  CHECK_THROWS_WITH_AS(timeline_svg(ranks, {.step = 3}), doctest::Contains("rank 0 took 3 optimizer steps; step 3"),
                       Error);
}

TEST_CASE("timeline files: no steps with gradient sync gives no straggler, and says why") {
  Dir dir;
  write_rank(dir.path, 0, {});
  std::vector<std::string> notes;
  const StragglerSummary s = straggler_summary(read_rank_traces(dir.path.string(), notes));
  CHECK(s.slowest == -1);
  CHECK(s.text().find("nothing to compare") != std::string::npos);
}

TEST_CASE("timeline files: bad directories and files are errors that name them") {
  Dir dir;
  std::vector<std::string> notes;
  CHECK_THROWS_WITH_AS(read_rank_traces((dir.path / "nope").string(), notes), doctest::Contains("is not a directory"),
                       Error);
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes), doctest::Contains("no accel_trace_rank<R>.json"),
                       Error);
  std::ofstream(dir.path / "accel_trace_rank0.json") << "{\"traceEvents\": [";
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes), doctest::Contains("does not parse as JSON"), Error);
  write_rank(dir.path, 0, {100});
  std::filesystem::rename(dir.path / "accel_trace_rank0.json", dir.path / "accel_trace_rank3.json");
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes),
                       doctest::Contains("otherData.rank is 0 but the file name says rank 3"), Error);
  std::filesystem::remove(dir.path / "accel_trace_rank3.json");
  write_rank(dir.path, 1, {100});
  std::filesystem::copy_file(dir.path / "accel_trace_rank1.json", dir.path / "accel_trace_rank01.json");
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes), doctest::Contains("two files"), Error);
  std::filesystem::remove(dir.path / "accel_trace_rank01.json");
  write_rank(dir.path, 0, {100}, 2);
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes),
                       doctest::Contains("rank 0 ran with 2 ranks but rank 1 with 4"), Error);
  write_rank(dir.path, 0, {100}, 0);
  CHECK_THROWS_WITH_AS(read_rank_traces(dir.path.string(), notes), doctest::Contains("world_size 0 does not hold rank 0"),
                       Error);
}
