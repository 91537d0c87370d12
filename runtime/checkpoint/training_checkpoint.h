// TrainingCheckpoint: what Accelerator::save_state writes and load_state reads, so that a resumed run
// continues bit for bit: every prepared model and optimizer (its state keyed by parameter name), the
// precision recipe's state (the fp16 loss scale), registered objects (LR schedulers, ...), every random
// stream of every rank (dropout layers, registered generators), each prepared loader's epoch and
// position as a global sample count, the accumulation position and the optimizer step count. docs/checkpoints.md has the layout.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "runtime/checkpoint/checkpoint_state.h"
#include "runtime/data_loader.h"
#include "runtime/environment.h"
#include "runtime/gradient_accumulation.h"
#include "runtime/precision/precision.h"
#include "runtime/safetensors.h"
#include "runtime/state_reader.h"
#include "runtime/strategy/strategy.h"
#include "runtime/training_step.h"
#include "tensor/generator.h"

namespace accel {

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
  TrainingStep* training_step = nullptr;
  std::vector<std::weak_ptr<nn::Module>> models;
  std::vector<PreparedOptimizer> optimizers;
  std::vector<PreparedLoader> loaders;
  std::vector<Checkpointable> objects;
  std::vector<Generator*> generators;
};

struct SaveStateOptions {
  // Copy the state to host memory, return, and write it on a background thread; the next save, or
  // the Accelerator's end, waits for it.
  bool async = false;
  // A model whose state is larger is written as Hugging Face's shards, model-00001-of-0000N.safetensors
  // with model.safetensors.index.json.
  int64_t max_shard_bytes = int64_t{10} << 30;
};

// What one rank writes into a checkpoint: taken at once, written later (now, or in the background).
struct CheckpointSnapshot {
  struct TensorFile {
    std::string name;
    nn::StateDict tensors;
    SafetensorsMetadata metadata;
    std::string group;  // what it holds ("model", "optimizer.safetensors", ...): its shards share one
  };
  int rank = 0;
  std::vector<TensorFile> tensor_files;                        // safetensors files
  std::vector<std::pair<std::string, std::string>> text_files;  // JSON files (rank 0)
};

// Every rank calls it: a strategy without state shards gathers its full state here (collective);
// one with them (tensor parallel, ZeRO) runs no collective. Rank 0 takes what is replicated, each
// writing rank its shards, each rank its random streams; with options.async the tensors are host copies, made in
// previous's buffers where they fit (an async save's snapshot, written by now).
CheckpointSnapshot take_checkpoint_snapshot(const TrainingParts& parts, const SaveStateOptions& options,
                                            const CheckpointSnapshot* previous = nullptr);
// Collective over comm (null with one process): the directory appears whole (checkpoint_dir.h) or not
// at all. May run on another thread than the snapshot, with a communicator of its own.
void write_checkpoint(const CheckpointSnapshot& snapshot, const std::filesystem::path& dir, Communicator* comm);
// Collective. Reads and checks everything first; if anything does not fit, throws an accel::Error
// naming the file and the key, and what was already applied is put back, so nothing is half-loaded.
void load_training_checkpoint(const TrainingParts& parts, const std::filesystem::path& dir);
// The i-th prepared model's whole state in the checkpoint dir: model.safetensors (model_<i> after the
// first), or the files its .safetensors.index.json names. Throws naming a missing or bad file.
nn::StateDict read_checkpoint_model(const std::filesystem::path& dir, size_t model_index = 0);
// The same, read lazily: the files' headers now, the elements a reader asks for when it asks.
std::shared_ptr<const StateReader> open_checkpoint_model(const std::filesystem::path& dir, size_t model_index = 0);

}  // namespace accel
