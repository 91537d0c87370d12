// CsvTracker: run_dir/metrics.csv, a header "step,<name>,..." and one row per log call, plus the
// configuration in run_dir/config.json (a CSV cell cannot hold it).
// A log call that brings a name the header lacks adds a column at the end: the file is rewritten once
// with the wider header, and the earlier rows get an empty cell there. A row leaves a cell empty for
// a name its call did not log. No value is dropped.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/tracking/tracker.h"

namespace accel {

class CsvTracker : public Tracker {
 public:
  // Creates (or empties) run_dir/metrics.csv.
  explicit CsvTracker(const std::filesystem::path& run_dir);
  std::string name() const override { return "csv"; }
  void store_init_configuration(const nlohmann::json& config) override;
  // A value named "step" is refused: that is the first column's name.
  void log(const nlohmann::json& values, int64_t step) override;
  void finish() override;
  const std::filesystem::path& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  // Rewrites the file with the header of columns_, given that the rows written so far have
  // old_columns cells after the step.
  void widen(size_t old_columns);
  std::filesystem::path run_dir_, path_;
  std::ofstream out_;
  std::vector<std::string> columns_;  // the names after "step", in the order they first came
  bool header_written_ = false;
};

// A CSV field as RFC 4180 writes it: quoted, with quotes doubled, when it holds a comma, a quote or a
// line break.
std::string csv_field(const std::string& text);

}  // namespace accel
