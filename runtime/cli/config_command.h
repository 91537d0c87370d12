// `accel config [default|update] [--config_file PATH] [--force]`: the command-line side of the config
// file: ask the questions, write the defaults (never over a file, unless --force), or update a file
// to the current keys keeping its values. --config_file goes before or after the subcommand.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <string>

namespace accel {

class ConfigCommand {
 public:
  // Adds `config` and its subcommands to app; the values land in this object, which must outlive parsing.
  explicit ConfigCommand(CLI::App& app);
  bool selected() const { return config_ != nullptr && config_->parsed(); }
  // Runs the chosen form; returns the exit status.
  int run(std::istream& in, std::ostream& out) const;

 private:
  CLI::App* config_ = nullptr;
  CLI::App* default_ = nullptr;
  CLI::App* update_ = nullptr;
  std::string path_;
  bool force_ = false;
};

// What `accel config update` does: reads path (accel's own format; an Accelerate file is refused, as
// accel reads it as it is), and writes it back in the current format: every key accel knows now, the
// file's values kept, the keys it lacked at their defaults, the comments rewritten. Returns the line
// to print: "accel config: updated PATH (added with defaults: debug)" or "(no key missing; ...)".
// A file that does not parse throws, as for every reader, and is left as it was.
std::string update_config_file(const std::string& path);

}  // namespace accel
