// CsvTracker: rows are flushed as they are written; a new name rewrites the file through a temporary
// file and a rename, so the file on disk is always a whole CSV.
#include "runtime/tracking/csv_tracker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace accel {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

namespace {

// A number as its shortest exact text; NaN and inf as nan, inf, -inf (JSON has no word for them).
std::string number_text(const nlohmann::json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) return fmt::format("{}", value.get<double>());
  return value.dump();
}

std::string header_of(const std::vector<std::string>& columns) {
  std::string line = "step";
  for (const std::string& c : columns) {
    line += ',';
    line += csv_field(c);
  }
  return line;
}

}  // namespace

CsvTracker::CsvTracker(const std::filesystem::path& run_dir)
    : run_dir_(run_dir), path_(run_dir / "metrics.csv"), out_(path_, std::ios::trunc) {
  if (!out_) throw Error(fmt::format("CsvTracker: cannot write '{}'", path_.string()));
}

void CsvTracker::store_init_configuration(const nlohmann::json& config) {
  const std::filesystem::path file = run_dir_ / "config.json";
  std::ofstream out(file, std::ios::trunc);
  out << config.dump(2) << '\n';
  if (!out) throw Error(fmt::format("CsvTracker: writing '{}' failed", file.string()));
}

void CsvTracker::widen(size_t old_columns) {
  out_.close();
  std::vector<std::string> rows;
  {
    std::ifstream in(path_);
    std::string line;
    if (header_written_) std::getline(in, line);  // the old header
    while (std::getline(in, line)) rows.push_back(line);
  }
  const std::filesystem::path temporary = path_.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << header_of(columns_) << '\n';
    // One row is one line: its cells are numbers, and names with line breaks are refused in log.
    const std::string empty_cells(columns_.size() - old_columns, ',');
    for (const std::string& row : rows) out << row << empty_cells << '\n';
    if (!out) throw Error(fmt::format("CsvTracker: rewriting '{}' failed", temporary.string()));
  }
  std::filesystem::rename(temporary, path_);
  out_.open(path_, std::ios::app);
  if (!out_) throw Error(fmt::format("CsvTracker: cannot reopen '{}'", path_.string()));
  header_written_ = true;
}

void CsvTracker::log(const nlohmann::json& values, int64_t step) {
  if (!out_.is_open()) throw Error(fmt::format("CsvTracker: '{}' is closed (finish was called)", path_.string()));
  if (values.contains("step"))
    throw Error("CsvTracker::log: a value is named 'step', the name of the step column; give it another name");
  const size_t old_columns = columns_.size();
  for (const auto& [name, value] : values.items()) {
    if (name.find_first_of("\r\n") != std::string::npos)
      throw Error(fmt::format("CsvTracker::log: the name {} holds a line break; a CSV header keeps one line",
                              nlohmann::json(name).dump()));
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) columns_.push_back(name);
  }
  if (!header_written_ || columns_.size() != old_columns) widen(old_columns);
  std::string row = std::to_string(step);
  for (const std::string& column : columns_) {
    row += ',';
    if (values.contains(column)) row += number_text(values.at(column));
  }
  out_ << row << '\n' << std::flush;
  if (!out_) throw Error(fmt::format("CsvTracker: writing '{}' failed", path_.string()));
}

void CsvTracker::finish() {
  if (out_.is_open()) out_.close();
}

}  // namespace accel
