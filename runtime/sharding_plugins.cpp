// AutoWrapPolicy in words, and the module type list of the environment and the config file.
#include "runtime/sharding_plugins.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace accel {

std::string AutoWrapPolicy::describe() const {
  if (is_default()) return "every module that owns parameters";
  std::vector<std::string> parts = module_types;
  if (min_num_params > 0) parts.push_back(fmt::format("min_num_params {}", min_num_params));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// A module's type_name() is a C++ class name; anything else matches no module, and would not survive
// to_yaml's plain list either.
bool is_type_name(const std::string& name) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) && std::all_of(name.begin(), name.end(), word);
}

std::optional<std::vector<std::string>> parse_module_types(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    const size_t first = name.find_first_not_of(" \t"), last = name.find_last_not_of(" \t");
    if (first == std::string::npos) return std::nullopt;
    names.push_back(name.substr(first, last - first + 1));
    if (!is_type_name(names.back())) return std::nullopt;
  }
  if (names.empty() || text.back() == ',') return std::nullopt;
  return names;
}

}  // namespace accel
