// match_state: the key and shape checks of load_state_dict, over names and shapes.
#include "nn/state_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_map>
#include <unordered_set>

namespace accel::nn {

StateMatch match_state(const std::vector<NamedShape>& own, const std::vector<NamedShape>& given, bool strict,
                       const std::string& module_type) {
  std::unordered_map<std::string, size_t> given_at;
  for (size_t i = 0; i < given.size(); ++i)
    if (!given_at.emplace(given[i].name, i).second)
      throw Error(fmt::format("load_state_dict: key '{}' appears twice", given[i].name));
  StateMatch match;
  std::vector<std::string> shape_notes;
  std::unordered_set<std::string> own_names;
  for (size_t i = 0; i < own.size(); ++i) {
    own_names.insert(own[i].name);
    const auto it = given_at.find(own[i].name);
    if (it == given_at.end()) {
      match.result.missing.push_back(own[i].name);
    } else if (given[it->second].shape != own[i].shape) {
      match.result.mismatched.push_back(own[i].name);
      shape_notes.push_back(fmt::format("{}: module {}, state {}", own[i].name, shape_str(own[i].shape),
                                        shape_str(given[it->second].shape)));
    } else {
      match.fits.emplace_back(i, it->second);
    }
  }
  for (const NamedShape& entry : given)
    if (!own_names.count(entry.name)) match.result.unexpected.push_back(entry.name);
  const LoadResult& r = match.result;
  if (strict && (!r.missing.empty() || !r.unexpected.empty() || !r.mismatched.empty())) {
    std::vector<std::string> parts;
    if (!r.missing.empty()) parts.push_back(fmt::format("missing keys [{}]", fmt::join(r.missing, ", ")));
    if (!r.unexpected.empty()) parts.push_back(fmt::format("unexpected keys [{}]", fmt::join(r.unexpected, ", ")));
    if (!shape_notes.empty()) parts.push_back(fmt::format("mis-shaped keys [{}]", fmt::join(shape_notes, ", ")));
    throw Error(fmt::format("load_state_dict: the state does not fit this {}: {}", module_type, fmt::join(parts, "; ")));
  }
  return match;
}

}  // namespace accel::nn
