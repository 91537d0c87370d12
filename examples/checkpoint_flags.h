// The checkpoint flags of Accelerate's examples, shared by mlp_classifier and char_gpt:
// --output_dir DIR, --checkpointing_steps N|epoch and --resume_from_checkpoint PATH|latest.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

#include <accel.h>

struct CheckpointFlags {
  std::string output_dir;
  std::string checkpointing_steps;     // "" (never), a step count, or "epoch"
  std::string resume_from_checkpoint;  // "" (start afresh), a checkpoint directory, or "latest"

  void add_to(CLI::App& app) {
    app.add_option("--output_dir", output_dir,
                   "Checkpoints go to DIR/checkpoints/checkpoint_<n>; a SIGTERM saves one and stops");
    app.add_option("--checkpointing_steps", checkpointing_steps, "Save a checkpoint every N optimizer steps, or each 'epoch'")
        ->check([](const std::string& v) -> std::string {
          if (v == "epoch" || (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && std::stoll(v) > 0))
            return "";
          return fmt::format("expected a positive step count or 'epoch', got '{}'", v);
        });
    app.add_option("--resume_from_checkpoint", resume_from_checkpoint,
                   "Continue from a checkpoint directory, or 'latest' in --output_dir");
  }

  // Checkpoints named automatically under --output_dir (which also turns on the save at a SIGTERM).
  accel::ProjectConfiguration project() const {
    if (output_dir.empty() && (!checkpointing_steps.empty() || resume_from_checkpoint == "latest"))
      throw accel::Error(fmt::format("--checkpointing_steps '{}' and --resume_from_checkpoint '{}' need --output_dir",
                                     checkpointing_steps, resume_from_checkpoint));
    return {.project_dir = output_dir, .automatic_checkpoint_naming = !output_dir.empty()};
  }

  // After prepare: loads the checkpoint asked for and says where the run continues.
  void resume(accel::Accelerator& accelerator) const {
    if (resume_from_checkpoint.empty()) return;
    const std::string dir = accelerator.load_state(resume_from_checkpoint == "latest" ? "" : resume_from_checkpoint);
    accelerator.print(fmt::format("resumed from {} at step {}", dir, accelerator.completed_steps()));
  }

  bool save_after_step(int64_t step) const {
    return !checkpointing_steps.empty() && checkpointing_steps != "epoch" && step % std::stoll(checkpointing_steps) == 0;
  }
  bool save_after_epoch() const { return checkpointing_steps == "epoch"; }
};
