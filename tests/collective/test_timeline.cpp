// The timeline (collective/timeline.h): nothing is recorded while it is off; spans land on their
// thread's track and nest; every collective becomes an async slice with its communicator, seq and call
// site, in the "gradient" category when its caller says so; the file each rank writes parses as a
// Chrome trace; a full buffer counts what it drops; a slice from an earlier recording is ignored.
#include "support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective/timeline.h"

using namespace test;

namespace {

std::filesystem::path trace_path(const Communicator& comm, const std::string& name) {
  return std::filesystem::temp_directory_path() /
         fmt::format("accel-timeline-{}-{}-rank{}.json", name, getpid(), comm.rank());
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> events_named(const nlohmann::json& trace, const std::string& ph, const std::string& name) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e.value("ph", "") == ph && e.value("name", "") == name) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("timeline: off by default, so spans and collectives record nothing") {
  REQUIRE_FALSE(timeline::enabled());
  { const timeline::Span span("forward"); }
  Tensor t = zeros({4});
  mpi().all_reduce(t);
  CHECK(timeline::recorded_events() == 0);
  CHECK(timeline::stop().empty());
}

TEST_CASE("timeline: spans nest on their threads, collectives are async slices, the file is a Chrome trace") {
  Communicator& comm = mpi();
  const auto path = trace_path(comm, "spans");
  timeline::start(path.string(), comm.rank(), comm.size(), "testhost", steady_ns());
  timeline::name_thread("main");
  CHECK_THROWS_WITH_AS(timeline::start(path.string(), 0, 1, "x", 0), doctest::Contains("already recording"), Error);
  {
    const timeline::Span outer("backward");
    { const timeline::Span inner("inner", "data"); }
    Tensor grads = ones({8});
    comm.all_reduce_async(grads, ReduceOp::sum, CallSite::gradient_sync("reducer bucket 0")).wait();
  }
  Tensor x = zeros({2});
  comm.all_reduce(x);
  const int line = __LINE__ - 1;
  std::thread([] {
    timeline::name_thread("helper");
    const timeline::Span span("on another thread", "checkpoint");
  }).join();
  CHECK(timeline::recorded_events() == 5);
  REQUIRE(timeline::stop() == path.string());
  CHECK_FALSE(timeline::enabled());

  const nlohmann::json trace = read_json(path);
  std::filesystem::remove(path);
  CHECK(trace["otherData"]["format"] == "accel timeline 1");
  CHECK(trace["otherData"]["rank"] == comm.rank());
  CHECK(trace["otherData"]["dropped_events"] == 0);

  const auto outer = events_named(trace, "X", "backward"), inner = events_named(trace, "X", "inner");
  REQUIRE(outer.size() == 1);
  REQUIRE(inner.size() == 1);
  CHECK(inner[0]["cat"] == "data");
  CHECK(inner[0]["tid"] == outer[0]["tid"]);
  CHECK(inner[0]["ts"].get<double>() >= outer[0]["ts"].get<double>());
  CHECK(inner[0]["ts"].get<double>() + inner[0]["dur"].get<double>() <=
        outer[0]["ts"].get<double>() + outer[0]["dur"].get<double>());
  const auto other = events_named(trace, "X", "on another thread");
  REQUIRE(other.size() == 1);
  CHECK(other[0]["tid"] != outer[0]["tid"]);

  const auto bucket_begin = events_named(trace, "b", "all_reduce reducer bucket 0");
  const auto bucket_end = events_named(trace, "e", "all_reduce reducer bucket 0");
  REQUIRE(bucket_begin.size() == 1);
  REQUIRE(bucket_end.size() == 1);
  CHECK(bucket_begin[0]["cat"] == "gradient");
  CHECK(bucket_begin[0]["id2"] == bucket_end[0]["id2"]);
  CHECK(bucket_begin[0]["args"]["communicator"] == comm.name());
  CHECK(bucket_begin[0]["args"]["count"] == 8);
  CHECK(bucket_begin[0]["args"]["dtype"] == "f32");
  CHECK(bucket_end[0]["ts"].get<double>() >= bucket_begin[0]["ts"].get<double>());
  // The slice runs inside the backward span that waited for it.
  CHECK(bucket_begin[0]["ts"].get<double>() >= outer[0]["ts"].get<double>());

  const std::string site = fmt::format("test_timeline.cpp:{}", line);
  const auto plain = events_named(trace, "b", "all_reduce " + site);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0]["cat"] == "collective");
  CHECK(plain[0]["args"]["site"] == site);

  std::map<int, std::string> names;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") names[e["tid"]] = e["args"]["name"];
  CHECK(names[outer[0]["tid"].get<int>()] == "main");
  CHECK(names[other[0]["tid"].get<int>()] == "helper");
}

TEST_CASE("timeline: a full buffer keeps the first events and counts the rest; old slices are ignored") {
  Communicator& comm = mpi();
  const auto path = trace_path(comm, "full");
  setenv("ACCEL_TRACE_MAX_EVENTS", "3", 1);
  timeline::start(path.string(), comm.rank(), comm.size(), "testhost", steady_ns());
  unsetenv("ACCEL_TRACE_MAX_EVENTS");
  const size_t slice = timeline::collective_begin({"all_reduce", "world", 1, "f32", 4, "here", false});
  REQUIRE(slice != timeline::kNoSlice);
  for (int i = 0; i < 4; ++i) const timeline::Span span("step");
  CHECK(timeline::recorded_events() == 3);
  CHECK(timeline::dropped_events() == 2);
  CHECK(timeline::stop() == path.string());
  nlohmann::json trace = read_json(path);
  CHECK(trace["otherData"]["dropped_events"] == 2);
  CHECK(events_named(trace, "X", "step").size() == 2);
  // Never ended: written as ending at the stop, and marked so.
  const auto open = events_named(trace, "b", "all_reduce here");
  REQUIRE(open.size() == 1);
  CHECK(open[0]["args"]["unfinished"] == true);

  // A handle from that recording must not touch the next one's events.
  timeline::start(path.string(), comm.rank(), comm.size(), "testhost", steady_ns());
  { const timeline::Span span("only"); }
  timeline::collective_end(slice, true);
  timeline::stop();
  trace = read_json(path);
  std::filesystem::remove(path);
  CHECK(events_named(trace, "X", "only").size() == 1);
  CHECK(events_named(trace, "b", "all_reduce here").empty());

  setenv("ACCEL_TRACE_MAX_EVENTS", "0", 1);
  CHECK_THROWS_WITH_AS(timeline::start(path.string(), 0, 1, "x", 0), doctest::Contains("ACCEL_TRACE_MAX_EVENTS is '0'"),
                       Error);
  unsetenv("ACCEL_TRACE_MAX_EVENTS");
  CHECK_FALSE(timeline::enabled());
}
