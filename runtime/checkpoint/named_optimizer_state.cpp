// Positional and named optimizer keys: "state.<i>.<slot>" and "state.<name>.<slot>" (slot names have
// no '.', parameter names may).
#include "runtime/checkpoint/named_optimizer_state.h"

#include <fmt/format.h>

#include <charconv>
#include <unordered_map>

#include "kernels/error.h"

namespace accel {

namespace {

constexpr const char* kPrefix = "state.";

// Splits "state.<middle>.<slot>"; false for any other key.
bool split_key(const std::string& key, std::string& middle, std::string& slot) {
  const std::string prefix = kPrefix;
  if (key.rfind(prefix, 0) != 0) return false;
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos || dot < prefix.size() + 1 || dot + 1 == key.size()) return false;
  middle = key.substr(prefix.size(), dot - prefix.size());
  slot = key.substr(dot + 1);
  return true;
}

}  // namespace

optim::StateDict name_optimizer_state(const optim::StateDict& by_index, const std::vector<std::string>& names) {
  optim::StateDict out;
  for (const auto& [key, t] : by_index) {
    std::string middle, slot;
    size_t index = 0;
    if (split_key(key, middle, slot)) {
      const auto [end, ec] = std::from_chars(middle.data(), middle.data() + middle.size(), index);
      if (ec == std::errc() && end == middle.data() + middle.size() && index < names.size()) {
        out.emplace_back(kPrefix + names[index] + "." + slot, t);
        continue;
      }
    }
    out.emplace_back(key, t);  // "lr" and the like
  }
  return out;
}

optim::StateDict index_optimizer_state(const optim::StateDict& by_name, const std::vector<std::string>& names,
                                       const std::string& source) {
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of.emplace(names[i], i);
  optim::StateDict out;
  for (const auto& [key, t] : by_name) {
    std::string name, slot;
    if (!split_key(key, name, slot)) {
      out.emplace_back(key, t);
      continue;
    }
    const auto it = index_of.find(name);
    if (it == index_of.end())
      throw Error(fmt::format("load_state: {}: key '{}' is the state of a parameter '{}' that this optimizer does "
                              "not have; is this a checkpoint of another model?",
                              source, key, name));
    out.emplace_back(fmt::format("{}{}.{}", kPrefix, it->second, slot), t);
  }
  return out;
}

}  // namespace accel
