// Tracker: where a run's hyper-parameters and logged values go (Accelerate's GeneralTracker). The
// built-in ones write JSONL, CSV and TensorBoard files; a user's own class implements the same four calls.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/error.h"

namespace accel {

class Tracker {
 public:
  virtual ~Tracker() = default;
  // The name log_with shows and get_tracker finds ("jsonl", "csv", "tensorboard", or the user's).
  virtual std::string name() const = 0;
  // Called once, by init_trackers, with the run's hyper-parameters (a JSON object, maybe empty).
  virtual void store_init_configuration(const nlohmann::json& config) = 0;
  // One Accelerator::log call: values is a JSON object of names to numbers (a NaN or inf stays one).
  virtual void log(const nlohmann::json& values, int64_t step) = 0;
  // Flushes and closes. Called once, by end_training or the Accelerator's destructor.
  virtual void finish() = 0;
  // true: only the main process calls this tracker (the built-in ones); false: every rank does.
  virtual bool main_process_only() const { return true; }
};

// One entry of AcceleratorOptions::log_with: a built-in tracker's name ("jsonl", "csv",
// "tensorboard", "all", or several separated by commas) or a user's Tracker object.
class TrackerChoice {
 public:
  TrackerChoice(const char* name) : name_(name) {}         // NOLINT: implicit, so that {"jsonl", mine} reads
  TrackerChoice(std::string name) : name_(std::move(name)) {}  // NOLINT
  template <class T, class = std::enable_if_t<std::is_base_of_v<Tracker, T>>>
  TrackerChoice(std::shared_ptr<T> tracker) : tracker_(std::move(tracker)) {  // NOLINT
    if (!tracker_) throw Error("AcceleratorOptions::log_with: a Tracker object is null");
  }
  // The name given, or "" for a Tracker object.
  const std::string& name() const { return name_; }
  // The Tracker object given, or null for a name.
  const std::shared_ptr<Tracker>& tracker() const { return tracker_; }

 private:
  std::string name_;
  std::shared_ptr<Tracker> tracker_;
};

}  // namespace accel
