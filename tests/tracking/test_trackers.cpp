// The trackers in one process: what the JSONL and CSV trackers write (a new name widens the CSV),
// the TFRecord frame and CRC32C, a user's tracker receiving every call, log_with from code, the
// environment and the config file, and the errors for bad names, a missing directory and bad values.
// tests/tracking/check_tracker_files.py reads the files again with an independent reader.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "accel.h"
#include "runtime/config_file.h"
#include "runtime/tracking/csv_tracker.h"
#include "runtime/tracking/jsonl_tracker.h"
#include "runtime/tracking/tensorboard_tracker.h"
#include "runtime/tracking/tfrecord.h"
#include "runtime/tracking/tracker_registry.h"
#include "../temp_dir.h"
#include "../text_file.h"

using namespace accel;
using nlohmann::json;

namespace {

// Records every call, as a user's tracker (a database, a web service) would receive them.
struct RecordingTracker : Tracker {
  std::string name() const override { return "recording"; }
  void store_init_configuration(const json& config) override { calls.push_back({{"config", config}}); }
  void log(const json& values, int64_t step) override { calls.push_back({{"step", step}, {"values", values}}); }
  void finish() override { calls.push_back("finish"); }
  std::vector<json> calls;
};

AcceleratorOptions quiet() {
  AcceleratorOptions o;
  o.print_settings = false;
  o.config_file = std::nullopt;
  return o;
}

}  // namespace

TEST_CASE("the JSONL tracker writes the config first, then one record per log call") {
  const test::TempDir dir("jsonl");
  {
    JsonlTracker tracker(dir.path);
    tracker.store_init_configuration({{"lr", 0.01}, {"model", "mlp"}});
    tracker.log({{"loss", 0.5}, {"lr", 0.01}}, 1);
    tracker.log({{"loss", 0.25}, {"accuracy", 1}}, 2);
    tracker.finish();
  }
  const std::vector<std::string> lines = test::lines_of(test::read_text(dir.path / "metrics.jsonl"));
  REQUIRE(lines.size() == 3);
  CHECK(json::parse(lines[0]) == json{{"config", {{"lr", 0.01}, {"model", "mlp"}}}});
  const json first = json::parse(lines[1]), second = json::parse(lines[2]);
  CHECK(first["step"] == 1);
  CHECK(first["values"] == json{{"loss", 0.5}, {"lr", 0.01}});
  CHECK(first["time"].get<double>() > 1.6e9);  // unix seconds
  CHECK(second["step"] == 2);
  CHECK(second["values"] == json{{"loss", 0.25}, {"accuracy", 1}});
}

TEST_CASE("the CSV tracker writes a header and rows; a new name adds a column and keeps every value") {
  const test::TempDir dir("csv");
  CsvTracker tracker(dir.path);
  tracker.store_init_configuration({{"epochs", 3}});
  CHECK(json::parse(test::read_text(dir.path / "config.json")) == json{{"epochs", 3}});
  tracker.log({{"loss", 0.5}}, 0);
  tracker.log({{"loss", 0.25}}, 1);
  CHECK(test::read_text(dir.path / "metrics.csv") == "step,loss\n0,0.5\n1,0.25\n");
  // A later call brings "lr": the header widens and the earlier rows get an empty cell.
  tracker.log({{"lr", 0.001}, {"loss", 0.125}}, 2);
  CHECK(test::read_text(dir.path / "metrics.csv") == "step,loss,lr\n0,0.5,\n1,0.25,\n2,0.125,0.001\n");
  // A call without "loss" leaves its cell empty; NaN and inf are written as such.
  tracker.log({{"lr", std::nan("")}}, 3);
  tracker.log({{"loss", INFINITY}, {"lr", 7}}, 4);
  CHECK(test::read_text(dir.path / "metrics.csv") ==
        "step,loss,lr\n0,0.5,\n1,0.25,\n2,0.125,0.001\n3,,nan\n4,inf,7\n");
  CHECK(tracker.columns() == std::vector<std::string>{"loss", "lr"});
  CHECK_THROWS_WITH_AS(tracker.log({{"step", 1}}, 5),
                       "CsvTracker::log: a value is named 'step', the name of the step column; give it another name",
                       Error);
  CHECK_THROWS_WITH_AS(tracker.log({{"two\nlines", 1}}, 5),
                       "CsvTracker::log: the name \"two\\nlines\" holds a line break; a CSV header keeps one line", Error);
  tracker.finish();
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("plain") == "plain");
}

TEST_CASE("CRC32C has its standard check value, and a TFRecord frames its data with masked CRCs") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the check value of CRC-32C (RFC 3720's polynomial)
  CHECK(crc32c("", 0) == 0u);
  // Continuing a CRC over a second part equals the CRC of the whole.
  CHECK(crc32c("6789", 4, crc32c("12345", 5)) == 0xE3069283u);
  const uint32_t crc = 0xE3069283u;
  CHECK(masked_crc32c("123456789", 9) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  const std::string record = tfrecord("abc");
  REQUIRE(record.size() == 8 + 4 + 3 + 4);
  CHECK(record.substr(0, 8) == std::string("\x03\0\0\0\0\0\0\0", 8));
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, record.data() + 8, 4);
  std::memcpy(&data_crc, record.data() + 15, 4);
  CHECK(length_crc == masked_crc32c(record.data(), 8));
  CHECK(record.substr(12, 3) == "abc");
  CHECK(data_crc == masked_crc32c("abc", 3));
}

TEST_CASE("the TensorBoard tracker names its file as TensorBoard expects and starts it with the file version") {
  const test::TempDir dir("tensorboard");
  TensorBoardTracker tracker(dir.path);
  const std::string file = tracker.path().filename().string();
  CHECK(file.rfind("events.out.tfevents.", 0) == 0);
  tracker.log({{"loss", 1.5}}, 3);
  tracker.finish();
  const std::string bytes = test::read_text(tracker.path());
  CHECK(bytes.find("brain.Event:2") != std::string::npos);
  CHECK(bytes.find("loss") != std::string::npos);
}

TEST_CASE("a user's tracker receives init, every log call (step defaults to completed_steps) and finish") {
  auto mine = std::make_shared<RecordingTracker>();
  AcceleratorOptions o = quiet();
  o.log_with = {mine};
  {
    Accelerator accelerator(o);
    CHECK(accelerator.settings().user_trackers == std::vector<std::string>{"recording"});
    CHECK(accelerator.settings().describe().find(", log_with=recording (code)") != std::string::npos);
    accelerator.init_trackers("run", {{"lr", 0.1}});  // no project_dir needed: no built-in tracker writes files
    CHECK(accelerator.get_tracker("recording") == mine.get());
    CHECK(accelerator.get_tracker("jsonl") == nullptr);
    accelerator.log({{"loss", 2.0}}, 7);
    accelerator.log({{"loss", 1.0}});  // no optimizer step yet: step 0
    CHECK_THROWS_WITH_AS(accelerator.log({{"loss", "low"}}), "Accelerator::log: value 'loss' is \"low\"; expected a number",
                         Error);
    CHECK_THROWS_WITH_AS(accelerator.log(json::array({1, 2})),
                         "Accelerator::log: values must be a JSON object of names to numbers, got [1,2]", Error);
    CHECK_THROWS_WITH_AS(accelerator.log({{"loss", 1.0}}, -1),
                         "Accelerator::log: step -1 is negative; expected a step >= 0", Error);
    CHECK_THROWS_WITH_AS(accelerator.init_trackers("again"),
                         "Accelerator::init_trackers('again'): the trackers are running already; call end_training first",
                         Error);
  }  // the destructor ends the run
  REQUIRE(mine->calls.size() == 4);
  CHECK(mine->calls[0] == json{{"config", {{"lr", 0.1}}}});
  CHECK(mine->calls[1] == json{{"step", 7}, {"values", {{"loss", 2.0}}}});
  CHECK(mine->calls[2] == json{{"step", 0}, {"values", {{"loss", 1.0}}}});
  CHECK(mine->calls[3] == "finish");
}

TEST_CASE("end_training closes the run once; log then needs init_trackers; with no tracker, log does nothing") {
  auto mine = std::make_shared<RecordingTracker>();
  AcceleratorOptions o = quiet();
  o.log_with = {mine};
  Accelerator accelerator(o);
  CHECK_THROWS_WITH_AS(accelerator.log({{"loss", 1.0}}),
                       "Accelerator::log: the trackers have not started; call init_trackers first", Error);
  accelerator.init_trackers("one");
  accelerator.end_training();
  accelerator.end_training();
  CHECK(mine->calls.size() == 2);  // config, finish
  CHECK_THROWS_AS(accelerator.log({{"loss", 1.0}}), Error);
  accelerator.init_trackers("two");  // a new run
  accelerator.log({{"loss", 1.0}}, 1);
  CHECK(mine->calls.size() == 4);

  Accelerator plain(quiet());
  plain.init_trackers("nothing", {{"lr", 1}});
  plain.log({{"loss", 1.0}});
  CHECK(plain.get_tracker("jsonl") == nullptr);
  CHECK(plain.settings().describe().find("log_with") == std::string::npos);  // the line says nothing of trackers
}

TEST_CASE("built-in trackers write into logging_dir/project_name, or project_dir/project_name") {
  const test::TempDir dir("accelerator");
  AcceleratorOptions o = quiet();
  o.log_with = {"jsonl", "csv,tensorboard"};
  o.project_configuration.project_dir = (dir.path / "project").string();
  {
    Accelerator accelerator(o);
    CHECK(accelerator.settings().log_with.value == std::vector<std::string>{"jsonl", "csv", "tensorboard"});
    accelerator.init_trackers("spirals", {{"hidden", 64}});
    accelerator.log({{"loss", 0.5}}, 1);
    REQUIRE(accelerator.get_tracker("tensorboard") != nullptr);
  }
  const auto run_dir = dir.path / "project" / "spirals";
  CHECK(std::filesystem::exists(run_dir / "metrics.jsonl"));
  CHECK(test::read_text(run_dir / "metrics.csv") == "step,loss\n1,0.5\n");
  int event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir))
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(event_files == 1);

  o.log_with = {"all"};
  o.project_configuration.logging_dir = (dir.path / "logs").string();
  {
    Accelerator accelerator(o);
    accelerator.init_trackers("second");
  }
  CHECK(std::filesystem::exists(dir.path / "logs" / "second" / "metrics.jsonl"));

  o.project_configuration = {};
  Accelerator no_dir(o);
  CHECK_THROWS_WITH_AS(no_dir.init_trackers("run"),
                       "Accelerator::init_trackers('run'): log_with jsonl,csv,tensorboard writes files, but there is no "
                       "directory for them; set ProjectConfiguration's project_dir (or logging_dir)",
                       Error);
  CHECK_THROWS_WITH_AS(no_dir.init_trackers(""), "Accelerator::init_trackers: project_name is empty; name the run", Error);
}

TEST_CASE("log_with: code, then ACCEL_LOG_WITH, then the config file; a bad name is named with the choices") {
  const test::TempDir dir("settings");
  const std::string config = (dir.path / "config.yaml").string();
  std::ofstream(config) << "log_with: [csv]\n";
  AcceleratorOptions o = quiet();
  o.config_file = config;
  EffectiveSettings s = resolve_settings(o, {});
  CHECK(s.log_with.value == std::vector<std::string>{"csv"});
  CHECK(s.log_with.source == "config file");
  CHECK(s.describe().find(", log_with=csv (config file)") != std::string::npos);
  s = resolve_settings(o, {{"ACCEL_LOG_WITH", "tensorboard, jsonl"}});
  CHECK(s.log_with.value == std::vector<std::string>{"tensorboard", "jsonl"});
  CHECK(s.log_with.source == "environment ACCEL_LOG_WITH");
  s = resolve_settings(o, {{"ACCEL_LOG_WITH", "all"}});
  CHECK(s.log_with.value == std::vector<std::string>{"jsonl", "csv", "tensorboard"});
  o.log_with = {"jsonl", std::make_shared<RecordingTracker>()};
  s = resolve_settings(o, {{"ACCEL_LOG_WITH", "tensorboard"}});
  CHECK(s.log_with.value == std::vector<std::string>{"jsonl"});
  CHECK(s.log_with.source == "code");
  CHECK(s.user_trackers == std::vector<std::string>{"recording"});
  CHECK(s.describe().find(", log_with=jsonl,recording (code)") != std::string::npos);

  o.log_with = {"jsonl", "wandb"};
  CHECK_THROWS_WITH_AS(resolve_settings(o, {}),
                       "Accelerator: log_with 'jsonl,wandb' from code is not valid; expected a comma-separated list of "
                       "jsonl, csv, tensorboard or all (or Tracker objects in code)",
                       Error);
  o.log_with = {};
  CHECK_THROWS_WITH_AS(resolve_settings(o, {{"ACCEL_LOG_WITH", "tensorbord"}}),
                       "Accelerator: log_with 'tensorbord' from environment ACCEL_LOG_WITH is not valid; expected a "
                       "comma-separated list of jsonl, csv, tensorboard or all (or Tracker objects in code)",
                       Error);
  CHECK_THROWS_WITH_AS(TrackerChoice(std::shared_ptr<RecordingTracker>()),
                       "AcceleratorOptions::log_with: a Tracker object is null", Error);
}

TEST_CASE("the config file's log_with: a list or a comma-separated string, checked, and written back") {
  CHECK(parse_config("log_with: [jsonl, tensorboard]\n", "t.yaml").log_with ==
        std::vector<std::string>{"jsonl", "tensorboard"});
  CHECK(parse_config("log_with: csv,jsonl\n", "t.yaml").log_with == std::vector<std::string>{"csv", "jsonl"});
  CHECK(parse_config("log_with: all\n", "t.yaml").log_with == std::vector<std::string>{"all"});
  CHECK(parse_config("log_with: []\n", "t.yaml").log_with.empty());
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\nlog_with: [jsonl, wandb]\n", "t.yaml"),
                       "t.yaml:2: log_with must be a list of jsonl, csv, tensorboard or all, got 'jsonl,wandb'", Error);
  CHECK_THROWS_WITH_AS(parse_config("log_with: {a: 1}\n", "t.yaml"),
                       "t.yaml:1: log_with must be a list of jsonl, csv, tensorboard or all", Error);
  CHECK_THROWS_WITH_AS(parse_config("log_with: csv\nlog_with: jsonl\n", "t.yaml"), "t.yaml:2: key 'log_with' appears twice",
                       Error);
  ConfigFile c;
  c.log_with = {"csv", "tensorboard"};
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  CHECK(parse_config(to_yaml(ConfigFile{}), "round trip") == ConfigFile{});
}

TEST_CASE("tracker names: lists, all, and what each name makes") {
  CHECK(parse_tracker_list("") == std::vector<std::string>{});
  CHECK(parse_tracker_list(" jsonl , csv ") == std::vector<std::string>{"jsonl", "csv"});
  CHECK_FALSE(parse_tracker_list("jsonl,").has_value());
  CHECK_FALSE(parse_tracker_list("JSONL").has_value());
  CHECK(expand_tracker_names({"csv", "all", "csv"}) == std::vector<std::string>{"csv", "jsonl", "tensorboard"});
  const test::TempDir dir("registry");
  for (const std::string& name : builtin_tracker_names()) CHECK(make_builtin_tracker(name, dir.path)->name() == name);
  CHECK_THROWS_WITH_AS(make_builtin_tracker("wandb", dir.path),
                       "make_builtin_tracker: unknown tracker 'wandb'; expected jsonl, csv or tensorboard", Error);
}
