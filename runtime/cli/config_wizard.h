// The questions of `accel config`, and the answers `accel config default` gives without asking.
#pragma once

#include <iosfwd>

#include "runtime/config_file.h"

namespace accel {

ConfigFile default_answers();
// Asks each question on out and reads the answer from in; an empty answer takes the default shown
// in brackets, an invalid one is asked again.
ConfigFile ask_config(std::istream& in, std::ostream& out);

}  // namespace accel
