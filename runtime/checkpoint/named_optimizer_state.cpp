// Positional and named optimizer keys: "state.<i>.<slot>" and "state.<name>.<slot>" (slot names have
// no '.', parameter names may).
#include "runtime/checkpoint/named_optimizer_state.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <charconv>
#include <map>
#include <set>
#include <unordered_map>

#include "kernels/error.h"

namespace accel {

namespace {

constexpr const char* kPrefix = "state.";
constexpr const char* kGroupPrefix = "param_group.";  // "param_group.<i>": parameter i's group

// The <i> or <name> of "param_group.<i|name>"; false for any other key.
bool group_member_key(const std::string& key, std::string& middle) {
  if (key.rfind(kGroupPrefix, 0) != 0 || key.size() == std::string(kGroupPrefix).size()) return false;
  middle = key.substr(std::string(kGroupPrefix).size());
  return true;
}

bool parse_index(const std::string& text, size_t limit, size_t& index) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  return ec == std::errc() && end == text.data() + text.size() && index < limit;
}

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

// Every parameter with state has the same slots (an optimizer keeps the same per-parameter state for
// each); one that lacks some was cut from the file, and is named here by its checkpoint key.
void check_complete(const std::map<std::string, std::set<std::string>>& slots_of, const std::set<std::string>& all_slots,
                    const std::string& source) {
  for (const auto& [name, slots] : slots_of)
    for (const std::string& slot : all_slots)
      if (!slots.count(slot))
        throw Error(fmt::format("load_state: {}: key '{}{}.{}' is missing (parameter '{}' has state {}, others also "
                                "'{}'); the file is incomplete",
                                source, kPrefix, name, slot, name, fmt::join(slots, ", "), slot));
}

}  // namespace

optim::StateDict name_optimizer_state(const optim::StateDict& by_index, const std::vector<std::string>& names) {
  optim::StateDict out;
  for (const auto& [key, t] : by_index) {
    std::string middle, slot;
    size_t index = 0;
    if (split_key(key, middle, slot) && parse_index(middle, names.size(), index)) {
      out.emplace_back(kPrefix + names[index] + "." + slot, t);
      continue;
    }
    if (group_member_key(key, middle) && parse_index(middle, names.size(), index)) {
      out.emplace_back(kGroupPrefix + names[index], t);
      continue;
    }
    out.emplace_back(key, t);  // "lr" and the like
  }
  return out;
}

std::vector<std::string> index_optimizer_keys(const std::vector<std::string>& by_name,
                                              const std::vector<std::string>& names, const std::string& source) {
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of.emplace(names[i], i);
  std::vector<std::string> out;
  std::map<std::string, std::set<std::string>> slots_of;  // by parameter name
  std::set<std::string> all_slots;
  for (const std::string& key : by_name) {
    std::string name, slot;
    if (group_member_key(key, name)) {
      const auto it = index_of.find(name);
      if (it == index_of.end())
        throw Error(fmt::format("load_state: {}: key '{}' is the parameter group of a parameter '{}' that this "
                                "optimizer does not have; is this a checkpoint of another model?",
                                source, key, name));
      out.push_back(fmt::format("{}{}", kGroupPrefix, it->second));
      continue;
    }
    if (!split_key(key, name, slot)) {
      out.push_back(key);
      continue;
    }
    const auto it = index_of.find(name);
    if (it == index_of.end())
      throw Error(fmt::format("load_state: {}: key '{}' is the state of a parameter '{}' that this optimizer does "
                              "not have; is this a checkpoint of another model?",
                              source, key, name));
    out.push_back(fmt::format("{}{}.{}", kPrefix, it->second, slot));
    slots_of[name].insert(slot);
    all_slots.insert(slot);
  }
  check_complete(slots_of, all_slots, source);
  return out;
}

optim::StateDict index_optimizer_state(const optim::StateDict& by_name, const std::vector<std::string>& names,
                                       const std::string& source) {
  std::vector<std::string> keys;
  for (const auto& [key, t] : by_name) keys.push_back(key);
  keys = index_optimizer_keys(keys, names, source);
  optim::StateDict out;
  for (size_t i = 0; i < keys.size(); ++i) out.emplace_back(keys[i], by_name[i].second);
  return out;
}

}  // namespace accel
