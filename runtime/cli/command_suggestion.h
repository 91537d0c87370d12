// "accel: unknown command 'lanch'; did you mean launch?": the nearest of the known names by edit
// distance, for a mistyped subcommand, which CLI11 would only call an unexpected argument.
#pragma once

#include <string>
#include <vector>

namespace accel {

// Levenshtein distance: the fewest single-character insertions, deletions and substitutions.
size_t edit_distance(const std::string& a, const std::string& b);

// The name in names nearest to typed (the first of equals); "" when names is empty.
std::string nearest_name(const std::string& typed, const std::vector<std::string>& names);

// Throws accel::Error when word is not one of names: "<context>: unknown command 'WORD'; did you
// mean NEAREST? (commands: ...)". context is e.g. "accel" or "accel config".
void check_command_name(const std::string& context, const std::string& word, const std::vector<std::string>& names);

}  // namespace accel
