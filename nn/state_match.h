// Which entries of a state fit a module: matched by name and shape, as load_state_dict matches them,
// from names and shapes alone, so that a loader that reads a file piece by piece checks it first.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace accel::nn {

struct NamedShape {
  std::string name;
  Shape shape;
};

struct StateMatch {
  LoadResult result;
  std::vector<std::pair<size_t, size_t>> fits;  // (index in own, index in given) of every key that fits
};

// own: the module's state_dict keys and shapes; given: the state's. Throws accel::Error for a key
// given twice, and, when strict, for any missing, unexpected or mis-shaped key, naming them all
// ("load_state_dict: the state does not fit this <module_type>: ...").
StateMatch match_state(const std::vector<NamedShape>& own, const std::vector<NamedShape>& given, bool strict,
                       const std::string& module_type);

}  // namespace accel::nn
