// Trackers: the Accelerator's set of trackers for one run. It makes the built-in ones at
// init_trackers (on the main process, in logging_dir/project_name), checks each log call's values
// the same way on every rank, and hands them to the trackers this rank runs.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tracking/tracker.h"

namespace accel {

class Trackers {
 public:
  // builtin: the names to make ("all" expanded); user: the user's Tracker objects; main_process:
  // whether this rank is the main process (the others run only trackers with main_process_only false).
  Trackers(std::vector<std::string> builtin, std::vector<std::shared_ptr<Tracker>> user, bool main_process);
  ~Trackers();
  Trackers(const Trackers&) = delete;
  Trackers& operator=(const Trackers&) = delete;

  // Whether any tracker was asked for (built-in or the user's).
  bool requested() const { return !builtin_.empty() || !user_.empty(); }
  // Starts the run: makes the built-in trackers in logging_dir/project_name (created; the main
  // process only) and gives each tracker config. Throws when trackers are asked for and logging_dir
  // is empty, or when the run has started already.
  void init(const std::string& project_name, const nlohmann::json& config, const std::string& logging_dir);
  // values: a JSON object of names to numbers. Throws on anything else, on every rank alike.
  void log(const nlohmann::json& values, int64_t step);
  // finish() on every tracker, once; after it, log throws until init starts a new run.
  void finish();
  // The tracker this rank runs under that name, or null.
  Tracker* get(const std::string& name) const;
  // Where the built-in trackers write ("" before init).
  const std::filesystem::path& run_dir() const { return run_dir_; }

 private:
  std::vector<std::string> builtin_;
  std::vector<std::shared_ptr<Tracker>> user_;
  bool main_process_;
  std::vector<std::shared_ptr<Tracker>> active_;  // this rank's, from init to finish
  bool started_ = false;
  std::filesystem::path run_dir_;
};

}  // namespace accel
