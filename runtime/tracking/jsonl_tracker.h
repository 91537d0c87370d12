// JsonlTracker: run_dir/metrics.jsonl, one JSON object a line: the configuration first,
//   {"config": {...}}
// then one record per log call, {"step": 3, "time": <unix seconds>, "values": {"loss": 0.25, ...}}.
#pragma once

#include <filesystem>
#include <fstream>

#include "runtime/tracking/tracker.h"

namespace accel {

class JsonlTracker : public Tracker {
 public:
  // Creates (or empties) run_dir/metrics.jsonl.
  explicit JsonlTracker(const std::filesystem::path& run_dir);
  std::string name() const override { return "jsonl"; }
  void store_init_configuration(const nlohmann::json& config) override;
  void log(const nlohmann::json& values, int64_t step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_line(const nlohmann::json& record);
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace accel
