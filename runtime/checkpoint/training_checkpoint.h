// TrainingCheckpoint: what Accelerator::save_state writes and load_state reads, so that a resumed run
// continues bit for bit: every prepared model and optimizer (its state keyed by parameter name), the
// precision recipe's state (the fp16 loss scale), registered objects (LR schedulers, ...), every random
// stream of every rank (dropout layers, registered generators), each prepared loader's epoch and
// position as a global sample count, and the accumulation position. docs/checkpoints.md has the layout.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "runtime/data_loader.h"
#include "runtime/environment.h"
#include "runtime/gradient_accumulation.h"
#include "runtime/precision/precision.h"
#include "runtime/strategy/strategy.h"
#include "tensor/generator.h"

namespace accel {

// Bumped when the layout changes; a checkpoint of a newer format is refused.
inline constexpr int kCheckpointFormat = 1;

// An object with state of its own that checkpoints carry (register_for_checkpointing).
struct Checkpointable {
  std::string kind;  // for messages: "LRScheduler", ...
  std::function<nn::StateDict()> state_dict;
  std::function<void(const nn::StateDict&)> load_state_dict;
};

struct PreparedOptimizer {
  std::weak_ptr<optim::Optimizer> optimizer;
  std::vector<std::string> names;  // of its parameters, from the prepared models
};

struct PreparedLoader {
  std::shared_ptr<LoaderProgress> progress;
  int64_t global_batch_size = 1;
};

// What the Accelerator hands to a checkpoint; it outlives every save and load.
struct TrainingParts {
  const Environment* env = nullptr;
  Strategy* strategy = nullptr;
  Precision* precision = nullptr;
  GradientAccumulation* accumulation = nullptr;
  std::vector<std::weak_ptr<nn::Module>> models;
  std::vector<PreparedOptimizer> optimizers;
  std::vector<PreparedLoader> loaders;
  std::vector<Checkpointable> objects;
  std::vector<Generator*> generators;
};

// Collective: every rank calls it. Rank 0 writes what is replicated, each rank its random streams;
// the directory appears whole (checkpoint_dir.h) or not at all.
void save_training_checkpoint(const TrainingParts& parts, const std::filesystem::path& dir);
// Collective. Reads and checks everything first; if anything does not fit, throws an accel::Error
// naming the file and the key, and what was already applied is put back, so nothing is half-loaded.
void load_training_checkpoint(const TrainingParts& parts, const std::filesystem::path& dir);

}  // namespace accel
