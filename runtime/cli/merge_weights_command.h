// `accel merge-weights CHECKPOINT OUT_DIR [--model I]`, as Accelerate's: one prepared model of a
// save_state checkpoint, whatever files it is split into, written whole as OUT_DIR/model.safetensors.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <string>

namespace accel {

class MergeWeightsCommand {
 public:
  explicit MergeWeightsCommand(CLI::App& app);
  bool selected() const { return command_ != nullptr && command_->parsed(); }
  // Writes the file and says what it wrote; throws accel::Error on a missing or bad checkpoint.
  int run(std::ostream& out) const;

 private:
  CLI::App* command_ = nullptr;
  std::string checkpoint_, out_dir_;
  size_t model_ = 0;
};

}  // namespace accel
