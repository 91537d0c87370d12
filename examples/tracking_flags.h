// The tracking flags shared by mlp_classifier and char_gpt: --log_with NAMES and --logging_dir DIR
// (docs/tracking.md). Without --log_with, ACCEL_LOG_WITH (`accel launch --log_with`) or the config
// file's log_with chooses the trackers, as in any accel program.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include <accel.h>

struct TrackingFlags {
  std::string log_with;     // "": the environment or the config file decides
  std::string logging_dir;  // "": --output_dir if given, else runs/

  void add_to(CLI::App& app) {
    app.add_option("--log_with", log_with, "Trackers of the loss and lr: jsonl, csv, tensorboard, all (comma-separated)");
    app.add_option("--logging_dir", logging_dir,
                   "Trackers write DIR/<example>/ (default: --output_dir, else runs)");
  }

  // After the project configuration is set (it may name project_dir).
  void apply(accel::AcceleratorOptions& options) const {
    if (!log_with.empty()) options.log_with = {log_with};
    accel::ProjectConfiguration& project = options.project_configuration;
    project.logging_dir = !logging_dir.empty() ? logging_dir : project.project_dir.empty() ? "runs" : "";
  }
};
