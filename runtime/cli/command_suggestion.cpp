// Edit distance over two rows, and the message that names the nearest command.
#include "runtime/cli/command_suggestion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "kernels/error.h"

namespace accel {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string nearest_name(const std::string& typed, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& name : names) {
    const size_t d = edit_distance(typed, name);
    if (best.empty() || d < best_distance) best = name, best_distance = d;
  }
  return best;
}

void check_command_name(const std::string& context, const std::string& word, const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), word) != names.end()) return;
  throw Error(fmt::format("{}: unknown command '{}'; did you mean {}? (commands: {})", context, word,
                          nearest_name(word, names), fmt::join(names, ", ")));
}

}  // namespace accel
