// Timeline: one mutex-guarded list of events per process, written as a Chrome trace (JSON object
// format: traceEvents plus otherData) when the recording stops.
#include "collective/timeline.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "collective/ledger.h"
#include "kernels/error.h"

namespace accel::timeline {

namespace {

struct Event {
  bool async;  // a collective's slice ("b" and "e"), else a span on its thread ("X")
  std::string name;
  const char* category;
  int tid;
  int64_t begin_ns, end_ns;  // end_ns 0: an async slice still running
  bool failed = false;
  nlohmann::json args;  // null for spans
};

struct Recording {
  std::mutex mutex;
  bool on = false;
  uint64_t generation = 0;  // of the current recording: a slice handle from an older one is ignored
  std::string path, host;
  int rank = 0, world_size = 1;
  int64_t origin_ns = 0;
  size_t max_events = 0;
  size_t dropped = 0;
  std::vector<Event> events;
  std::map<int, std::string> thread_names;
};

std::atomic<bool> g_enabled{false};

Recording& recording() {
  static auto* r = new Recording();  // never destroyed: stop() runs at exit
  return *r;
}

int this_thread_id() {
  static std::atomic<int> next{1};
  thread_local const int id = next++;
  return id;
}

size_t max_events_setting() {
  const char* text = std::getenv("ACCEL_TRACE_MAX_EVENTS");
  if (text == nullptr || *text == '\0') return 2'000'000;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 1'000'000'000)
    throw Error(fmt::format("ACCEL_TRACE_MAX_EVENTS is '{}', expected a count of events in [1, 1000000000]", text));
  return static_cast<size_t>(value);
}

// Handles carry the recording's generation in their top 24 bits.
constexpr int kIndexBits = 40;
size_t make_handle(uint64_t generation, size_t index) {
  return static_cast<size_t>(((generation & 0xffffff) << kIndexBits) | index);
}

// With the mutex held: keeps e, or counts it as dropped. The index kept, or kNoSlice.
size_t keep(Recording& r, Event e) {
  if (r.events.size() >= r.max_events) {
    ++r.dropped;
    return kNoSlice;
  }
  r.events.push_back(std::move(e));
  return r.events.size() - 1;
}

double micros(const Recording& r, int64_t ns) { return static_cast<double>(ns - r.origin_ns) / 1000.0; }

nlohmann::json metadata(const char* what, int pid, int tid, nlohmann::json args) {
  nlohmann::json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

// With the mutex held: the whole trace as JSON; slices still running end now, marked unfinished.
nlohmann::json trace_json(const Recording& r, int64_t now) {
  nlohmann::json events = nlohmann::json::array();
  const int pid = r.rank;
  events.push_back(metadata("process_name", pid, -1, {{"name", fmt::format("rank {} ({})", r.rank, r.host)}}));
  events.push_back(metadata("process_sort_index", pid, -1, {{"sort_index", r.rank}}));
  for (const auto& [tid, name] : r.thread_names) events.push_back(metadata("thread_name", pid, tid, {{"name", name}}));
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    if (!e.async) {
      events.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", pid}, {"tid", e.tid},
                        {"ts", micros(r, e.begin_ns)}, {"dur", static_cast<double>(e.end_ns - e.begin_ns) / 1000.0}});
      continue;
    }
    const nlohmann::json id = {{"local", fmt::format("0x{:x}", i)}};
    nlohmann::json args = e.args;
    if (e.end_ns == 0) args["unfinished"] = true;
    if (e.failed) args["failed"] = true;
    events.push_back({{"ph", "b"}, {"name", e.name}, {"cat", e.category}, {"id2", id}, {"pid", pid},
                      {"tid", e.tid}, {"ts", micros(r, e.begin_ns)}, {"args", std::move(args)}});
    events.push_back({{"ph", "e"}, {"name", e.name}, {"cat", e.category}, {"id2", id}, {"pid", pid},
                      {"tid", e.tid}, {"ts", micros(r, e.end_ns == 0 ? now : e.end_ns)}});
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"format", "accel timeline 1"},
            {"rank", r.rank},
            {"world_size", r.world_size},
            {"host", r.host},
            {"origin_steady_ns", r.origin_ns},
            {"events", r.events.size()},
            {"dropped_events", r.dropped}}}};
}

}  // namespace

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void start(const std::string& path, int rank, int world_size, const std::string& host, int64_t origin_ns) {
  const size_t max_events = max_events_setting();
  Recording& r = recording();
  std::lock_guard lock(r.mutex);
  if (r.on)
    throw Error(fmt::format("timeline::start: already recording to {}; cannot also record to {}", r.path, path));
  static std::once_flag at_exit;
  std::call_once(at_exit, [] {
    std::atexit([] {
      try {
        stop();
      } catch (const std::exception& e) {
        fmt::print(stderr, "accel: {}\n", e.what());  // at exit there is no caller left to throw to
      }
    });
  });
  r.on = true;
  ++r.generation;
  r.path = path;
  r.host = host;
  r.rank = rank;
  r.world_size = world_size;
  r.origin_ns = origin_ns;
  r.max_events = max_events;
  r.dropped = 0;
  r.events.clear();
  r.thread_names.clear();
  g_enabled.store(true, std::memory_order_relaxed);
}

std::string stop() {
  Recording& r = recording();
  std::lock_guard lock(r.mutex);
  if (!r.on) return "";
  g_enabled.store(false, std::memory_order_relaxed);
  r.on = false;
  const nlohmann::json trace = trace_json(r, steady_ns());
  r.events.clear();
  r.events.shrink_to_fit();
  const std::filesystem::path file(r.path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file);
  out << trace.dump() << "\n";
  if (!out)
    throw Error(fmt::format("timeline::stop: could not write rank {}'s trace to {}", r.rank, r.path));
  if (r.dropped > 0)  // never lost in silence
    fmt::print(stderr, "accel: rank {}: the timeline kept its first {} events and dropped {} more "
               "(ACCEL_TRACE_MAX_EVENTS raises the limit)\n", r.rank, r.max_events, r.dropped);
  return r.path;
}

void name_thread(const std::string& name) {
  Recording& r = recording();
  const int tid = this_thread_id();
  std::lock_guard lock(r.mutex);
  if (r.on) r.thread_names[tid] = name;
}

Span::Span(const char* name, const char* category) : recording_(enabled()), category_(category) {
  if (!recording_) return;
  name_ = name;
  begin_ns_ = steady_ns();
}

Span::Span(std::string name, const char* category) : recording_(enabled()), category_(category) {
  if (!recording_) return;
  name_ = std::move(name);
  begin_ns_ = steady_ns();
}

Span::~Span() {
  if (!recording_) return;
  const int64_t end = steady_ns();
  Recording& r = recording();
  const int tid = this_thread_id();
  std::lock_guard lock(r.mutex);
  if (!r.on) return;
  if (!r.thread_names.count(tid)) r.thread_names[tid] = fmt::format("thread {}", tid);
  keep(r, Event{false, std::move(name_), category_, tid, begin_ns_, end, false, nullptr});
}

size_t collective_begin(const CollectiveInfo& info) {
  if (!enabled()) return kNoSlice;
  const int64_t now = steady_ns();
  Recording& r = recording();
  const int tid = this_thread_id();
  std::lock_guard lock(r.mutex);
  if (!r.on) return kNoSlice;
  nlohmann::json args = {{"communicator", info.communicator}, {"seq", info.seq}, {"dtype", info.dtype},
                         {"count", info.count}, {"site", info.site}};
  Event e{true, fmt::format("{} {}", info.op, info.site), info.gradient ? "gradient" : "collective", tid, now, 0,
          false, std::move(args)};
  const size_t index = keep(r, std::move(e));
  return index == kNoSlice ? kNoSlice : make_handle(r.generation, index);
}

void collective_end(size_t slice, bool failed) {
  if (slice == kNoSlice) return;
  const int64_t now = steady_ns();
  Recording& r = recording();
  std::lock_guard lock(r.mutex);
  const size_t index = slice & ((size_t{1} << kIndexBits) - 1);
  if (!r.on || (slice >> kIndexBits) != (r.generation & 0xffffff) || index >= r.events.size()) return;
  r.events[index].end_ns = now;
  r.events[index].failed = failed;
}

size_t recorded_events() {
  Recording& r = recording();
  std::lock_guard lock(r.mutex);
  return r.events.size();
}

size_t dropped_events() {
  Recording& r = recording();
  std::lock_guard lock(r.mutex);
  return r.dropped;
}

}  // namespace accel::timeline
