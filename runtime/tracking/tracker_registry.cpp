// The built-in trackers' names and the objects they make.
#include "runtime/tracking/tracker_registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/error.h"
#include "runtime/tracking/csv_tracker.h"
#include "runtime/tracking/jsonl_tracker.h"
#include "runtime/tracking/tensorboard_tracker.h"

namespace accel {

const std::vector<std::string>& builtin_tracker_names() {
  static const std::vector<std::string> names = {"jsonl", "csv", "tensorboard"};
  return names;
}

std::string tracker_choices() { return "jsonl, csv, tensorboard or all"; }

namespace {
std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}
}  // namespace

std::optional<std::vector<std::string>> parse_tracker_list(const std::string& comma_separated) {
  std::vector<std::string> names;
  if (trimmed(comma_separated).empty()) return names;
  size_t begin = 0;
  while (true) {
    const size_t comma = comma_separated.find(',', begin);
    const std::string name = trimmed(comma_separated.substr(begin, comma == std::string::npos ? comma : comma - begin));
    const auto& known = builtin_tracker_names();
    if (name != "all" && std::find(known.begin(), known.end(), name) == known.end()) return std::nullopt;
    names.push_back(name);
    if (comma == std::string::npos) return names;
    begin = comma + 1;
  }
}

std::vector<std::string> expand_tracker_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const std::string& name : names) {
    if (name == "all")
      for (const std::string& builtin : builtin_tracker_names()) add(builtin);
    else
      add(name);
  }
  return out;
}

std::unique_ptr<Tracker> make_builtin_tracker(const std::string& name, const std::filesystem::path& run_dir) {
  if (name == "jsonl") return std::make_unique<JsonlTracker>(run_dir);
  if (name == "csv") return std::make_unique<CsvTracker>(run_dir);
  if (name == "tensorboard") return std::make_unique<TensorBoardTracker>(run_dir);
  throw Error(fmt::format("make_builtin_tracker: unknown tracker '{}'; expected jsonl, csv or tensorboard", name));
}

}  // namespace accel
