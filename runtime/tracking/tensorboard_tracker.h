// TensorBoardTracker: an event file that TensorBoard reads, run_dir/events.out.tfevents.<unix
// time>.<host>: TFRecords of Event protos, the file version first, the configuration as a text
// summary (tag "config", the Text tab), then one event per log call with a scalar per value.
#pragma once

#include <filesystem>
#include <fstream>

#include "runtime/tracking/tracker.h"

namespace accel {

class TensorBoardTracker : public Tracker {
 public:
  // Creates the event file in run_dir and writes its file_version event.
  explicit TensorBoardTracker(const std::filesystem::path& run_dir);
  std::string name() const override { return "tensorboard"; }
  void store_init_configuration(const nlohmann::json& config) override;
  // Scalars are float32 in TensorBoard's events (simple_value).
  void log(const nlohmann::json& values, int64_t step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace accel
