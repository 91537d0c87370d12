// accel config's questions: where it runs, machines and processes, precision, accumulation.
#include "runtime/cli/config_wizard.h"

#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <string>

#include "kernels/error.h"

namespace accel {

ConfigFile default_answers() { return ConfigFile{}; }

namespace {

// Asks until parse accepts the answer (or the input ends, which keeps the default).
template <class T>
T ask(std::istream& in, std::ostream& out, const std::string& question, const T& fallback,
      const std::function<bool(const std::string&, T&)>& parse) {
  for (;;) {
    out << question << " [" << fmt::format("{}", fallback) << "]: " << std::flush;
    std::string line;
    if (!std::getline(in, line)) {
      out << "\n";
      return fallback;
    }
    if (line.empty()) return fallback;
    T value{};
    if (parse(line, value)) return value;
    out << fmt::format("  '{}' is not a valid answer\n", line);
  }
}

std::function<bool(const std::string&, std::string&)> one_of(std::vector<std::string> allowed) {
  return [allowed](const std::string& s, std::string& v) {
    for (const auto& a : allowed)
      if (s == a) return v = s, true;
    return false;
  };
}

bool parse_count(const std::string& s, int& v) {
  try {
    size_t used = 0;
    v = std::stoi(s, &used);
    return used == s.size() && v >= 0;
  } catch (const std::exception&) {
    return false;
  }
}

bool parse_yes_no(const std::string& s, bool& v) {
  if (s == "yes" || s == "y" || s == "true") return v = true, true;
  if (s == "no" || s == "n" || s == "false") return v = false, true;
  return false;
}

}  // namespace

ConfigFile ask_config(std::istream& in, std::ostream& out) {
  ConfigFile c;
  c.environment = ask<std::string>(in, out, "Where does it run? (local, hosts, slurm)", c.environment,
                                   one_of({"local", "hosts", "slurm"}));
  if (c.environment != "local") {
    c.num_machines = ask<int>(in, out, "How many machines?", 2, [](const std::string& s, int& v) { return parse_count(s, v) && v >= 1; });
    if (c.environment == "hosts") {
      c.hostfile = ask<std::string>(in, out, "Open MPI hostfile (one 'host slots=N' per line)", std::string("hostfile"),
                                    [](const std::string& s, std::string& v) { return v = s, !s.empty(); });
    }
  }
  c.num_processes = ask<int>(in, out, "How many processes in total?", c.num_machines,
                             [&](const std::string& s, int& v) { return parse_count(s, v) && v >= c.num_machines; });
  c.use_cpu = ask<bool>(in, out, "Train on the CPU only, even with GPUs? (yes/no)", false, parse_yes_no);
  const std::vector<std::string> precisions = available_names(kMixedPrecisionNames);
  const std::string precision =
      ask<std::string>(in, out, fmt::format("Mixed precision? ({})", fmt::join(precisions, ", ")),
                       name_of(c.mixed_precision), one_of(precisions));
  c.mixed_precision = *value_in(kMixedPrecisionNames, precision);
  c.gradient_accumulation_steps = ask<int>(in, out, "Gradient accumulation steps?", 1,
                                           [](const std::string& s, int& v) { return parse_count(s, v) && v >= 1; });
  validate_config(c, "accel config");
  return c;
}

}  // namespace accel
