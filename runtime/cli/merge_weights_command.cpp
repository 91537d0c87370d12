// merge-weights: the checkpoint's model files read as one state, checked complete, and saved.
#include "runtime/cli/merge_weights_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "kernels/error.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/checkpoint/training_checkpoint.h"
#include "runtime/safetensors.h"

namespace accel {

namespace fs = std::filesystem;

MergeWeightsCommand::MergeWeightsCommand(CLI::App& app) {
  command_ = app.add_subcommand("merge-weights",
                                "Write one model of a save_state checkpoint as a single model.safetensors");
  command_->add_option("checkpoint", checkpoint_, "The checkpoint directory (save_state's)")->required();
  command_->add_option("output", out_dir_, "The directory to write model.safetensors into")->required();
  command_->add_option("--model", model_, "Which prepared model: 0 for the first (model*), i for model_i*")
      ->capture_default_str();
}

int MergeWeightsCommand::run(std::ostream& out) const {
  const fs::path dir(checkpoint_);
  if (!fs::is_directory(dir))
    throw Error(fmt::format("accel merge-weights: {} is not a directory; expected a save_state checkpoint", checkpoint_));
  if (!is_complete_checkpoint(dir))
    throw Error(fmt::format("accel merge-weights: {} has no COMPLETE marker; its save did not finish", checkpoint_));
  const nn::StateDict state = read_checkpoint_model(dir, model_);
  fs::create_directories(out_dir_);
  const fs::path file = fs::path(out_dir_) / "model.safetensors";
  save_safetensors(file.string(), state);
  int64_t bytes = 0;
  for (const auto& [name, t] : state) bytes += static_cast<int64_t>(t.nbytes());
  out << fmt::format("accel merge-weights: wrote {} ({} tensors, {} bytes of data)\n", file.string(), state.size(), bytes);
  return 0;
}

}  // namespace accel
