// The built-in trackers' names, and lists of them checked and expanded.
#include "runtime/tracking/tracker_names.h"

#include <algorithm>

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

}  // namespace accel
