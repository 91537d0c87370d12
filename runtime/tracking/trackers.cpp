// Trackers: one run's trackers, from init_trackers to end_training.
#include "runtime/tracking/trackers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/tracking/tracker_registry.h"

namespace accel {

Trackers::Trackers(std::vector<std::string> builtin, std::vector<std::shared_ptr<Tracker>> user, bool main_process)
    : builtin_(std::move(builtin)), user_(std::move(user)), main_process_(main_process) {}

Trackers::~Trackers() {
  try {
    finish();
  } catch (const std::exception& e) {
    // A destructor cannot throw: say what was not closed.
    std::cerr << "accel: closing the trackers failed: " << e.what() << std::endl;
  }
}

void Trackers::init(const std::string& project_name, const nlohmann::json& config, const std::string& logging_dir) {
  if (started_)
    throw Error(fmt::format("Accelerator::init_trackers('{}'): the trackers are running already; call end_training "
                            "first",
                            project_name));
  if (project_name.empty()) throw Error("Accelerator::init_trackers: project_name is empty; name the run");
  if (!config.is_object())
    throw Error(fmt::format("Accelerator::init_trackers('{}'): config must be a JSON object of hyper-parameters, got "
                            "{}",
                            project_name, config.dump()));
  if (!builtin_.empty() && logging_dir.empty())
    throw Error(fmt::format("Accelerator::init_trackers('{}'): log_with {} writes files, but there is no directory "
                            "for them; set ProjectConfiguration's project_dir (or logging_dir)",
                            project_name, fmt::join(builtin_, ",")));
  std::vector<std::shared_ptr<Tracker>> active;
  if (main_process_ && !builtin_.empty()) {
    run_dir_ = std::filesystem::path(logging_dir) / project_name;
    std::filesystem::create_directories(run_dir_);
    for (const std::string& name : builtin_) active.push_back(make_builtin_tracker(name, run_dir_));
  }
  for (const auto& tracker : user_)
    if (main_process_ || !tracker->main_process_only()) active.push_back(tracker);
  for (const auto& tracker : active) tracker->store_init_configuration(config);
  active_ = std::move(active);
  started_ = true;
}

void Trackers::log(const nlohmann::json& values, int64_t step) {
  if (!requested()) return;  // no tracker asked for: logging costs nothing
  if (!started_) throw Error("Accelerator::log: the trackers have not started; call init_trackers first");
  if (!values.is_object())
    throw Error(fmt::format("Accelerator::log: values must be a JSON object of names to numbers, got {}", values.dump()));
  for (const auto& [name, value] : values.items())
    if (!value.is_number())
      throw Error(fmt::format("Accelerator::log: value '{}' is {}; expected a number", name, value.dump()));
  if (step < 0) throw Error(fmt::format("Accelerator::log: step {} is negative; expected a step >= 0", step));
  for (const auto& tracker : active_) tracker->log(values, step);
}

void Trackers::finish() {
  if (!started_) return;
  started_ = false;
  const std::vector<std::shared_ptr<Tracker>> active = std::move(active_);
  active_.clear();
  for (const auto& tracker : active) tracker->finish();
}

Tracker* Trackers::get(const std::string& name) const {
  for (const auto& tracker : active_)
    if (tracker->name() == name) return tracker.get();
  return nullptr;
}

}  // namespace accel
