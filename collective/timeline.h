// Timeline: this rank's trace in Chrome's trace-event format (docs/debugging.md, "Timeline"): spans
// of work on each thread (forward, backward, the optimizer step, ...) and each collective as an async
// slice from its call to its end, kept in memory and written as one JSON file per rank when it stops.
// Off unless started (ACCEL_TRACE=DIR, AcceleratorOptions::trace_dir); when off a span costs one load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace accel::timeline {

// Whether events are being recorded. One relaxed atomic load.
bool enabled();

// Starts recording for rank `rank` of world_size (on `host`), to be written to `path`. Times are written in
// microseconds after origin_ns (steady clock); the ranks take it right after a common barrier, so
// that their files line up. At most max_events are kept (ACCEL_TRACE_MAX_EVENTS, default 2,000,000);
// later ones are counted and the count is written with the file. Throws if already recording.
void start(const std::string& path, int rank, int world_size, const std::string& host, int64_t origin_ns);
// Writes the file and stops recording; the path written, or "" if nothing was recording. Also run at
// exit, so that a program that never destroys its Accelerator still leaves its trace.
std::string stop();

// The calling thread's track name in the trace ("main", "checkpoint writer"); threads that do not
// name themselves are "thread N".
void name_thread(const std::string& name);

// Work on this thread from construction to destruction. category groups spans in the viewer and in
// `accel trace merge`'s summary ("compute", "data", "checkpoint").
class Span {
 public:
  explicit Span(const char* name, const char* category = "compute");
  Span(std::string name, const char* category);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool recording_;
  int64_t begin_ns_ = 0;
  std::string name_;
  const char* category_;
};

// A collective, from the call to its end: an async slice on its communicator's track. category is
// "gradient" for gradient synchronisation (the reducer's buckets, ZeRO's reduce-scatters), which the
// straggler summary measures up to, else "collective". Returns a handle for collective_end, or
// kNoSlice when not recording.
constexpr size_t kNoSlice = static_cast<size_t>(-1);
struct CollectiveInfo {
  const char* op;
  std::string communicator;
  uint64_t seq;
  std::string dtype;
  int64_t count;
  std::string site;
  bool gradient;
};
size_t collective_begin(const CollectiveInfo& info);
// Ends the slice (from whichever thread sees the collective finish); a no-op for kNoSlice or once
// the recording it belonged to has stopped.
void collective_end(size_t slice, bool failed);

// Events kept and dropped so far in the current recording (for tests and the bench).
size_t recorded_events();
size_t dropped_events();

}  // namespace accel::timeline
