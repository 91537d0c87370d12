// ConfigCommand: accel config's three forms, and the update of an existing file.
#include "runtime/cli/config_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <vector>

#include "kernels/error.h"
#include "runtime/cli/config_wizard.h"
#include "runtime/config_file.h"

namespace accel {

namespace {

// The top-level keys of a YAML mapping, in file order.
std::vector<std::string> keys_of(const std::string& yaml_text) {
  std::vector<std::string> keys;
  const YAML::Node root = YAML::Load(yaml_text);
  if (root.IsMap())
    for (const auto& entry : root) keys.push_back(entry.first.Scalar());
  return keys;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("accel config update: cannot open '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ConfigCommand::ConfigCommand(CLI::App& app) {
  config_ = app.add_subcommand("config", "Ask the launch questions once and write the config file");
  config_->add_option("--config_file", path_, "The config file (default: " + default_config_path() + ")");
  default_ = config_->add_subcommand("default", "Write a config with default answers, without questions");
  default_->add_flag("--force", force_, "Overwrite an existing file");
  update_ = config_->add_subcommand(
      "update", "Rewrite an existing config file with every current key, keeping its values");
  // `accel config default --config_file X`: options the subcommand does not know go to `config`.
  default_->fallthrough();
  update_->fallthrough();
}

int ConfigCommand::run(std::istream& in, std::ostream& out) const {
  const std::string path = path_.empty() ? default_config_path() : path_;
  if (update_->parsed()) {
    out << update_config_file(path) << "\n";
    return 0;
  }
  if (default_->parsed() && std::filesystem::exists(path) && !force_)
    throw Error(fmt::format("accel config default: {} exists; give --force to overwrite it, or `accel config update` "
                            "to bring it to the current keys keeping its values",
                            path));
  const ConfigFile answers = default_->parsed() ? default_answers() : ask_config(in, out);
  save_config(answers, path);
  out << fmt::format("accel config: wrote {}\n", path);
  return 0;
}

std::string update_config_file(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw Error(fmt::format("accel config update: there is no config file at {}; write one with `accel config` or "
                            "`accel config default`",
                            path));
  const std::string text = read_text(path);
  const ConfigFile config = parse_config(text, path);
  if (config.origin.format == "accelerate")
    throw Error(fmt::format("accel config update: {} is an Accelerate config file; accel reads it as it is (its "
                            "ignored keys: {}) and updates only its own format",
                            path, ignored_keys_text(config)));
  const std::vector<std::string> had = keys_of(text);
  const std::set<std::string> present(had.begin(), had.end());
  std::vector<std::string> added;
  for (const std::string& key : keys_of(to_yaml(ConfigFile{})))
    if (!present.count(key)) added.push_back(key);
  save_config(config, path);
  if (added.empty())
    return fmt::format("accel config: updated {} (no key missing; values kept, comments rewritten)", path);
  return fmt::format("accel config: updated {} (added with defaults: {}; the other values kept)", path,
                     fmt::join(added, ", "));
}

}  // namespace accel
