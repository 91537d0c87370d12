// DataLoader: batches of a Dataset in a seeded per-epoch order, sharded between data-parallel
// ranks by global sample position so every rank sees a disjoint part of each epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/gradient_state.h"

namespace accel {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;  // with shuffle: the epoch's order depends only on (seed, epoch)
  bool drop_last = false;
};

// How each epoch is split between ranks; the Accelerator sets it in prepare().
struct ShardOptions {
  int rank = 0;
  int world_size = 1;
  // With several ranks, pad the last step with samples from the start of the epoch so every rank
  // runs equally many full batches. One process keeps its short last batch.
  bool even_batches = true;
  // batch_size is the global batch, split between the ranks (otherwise it is per rank).
  bool split_batches = false;
};

// Where a loader is in its epochs. Batches update it as they are produced; a checkpoint saves it; a
// resume sets resume_epoch/resume_step so that the next pass over that epoch starts where the saved
// run stopped (once). Copies of a loader share it; prepare() gives the prepared loader its own.
struct LoaderProgress {
  int64_t epoch = 0;
  int64_t steps_done = 0;     // batches of `epoch` produced so far: the latest step + 1
  int64_t resume_epoch = -1;  // -1: no resume pending
  int64_t resume_step = 0;
};

struct Batch {
  std::vector<Tensor> fields;
  // Trailing samples of this batch that repeat earlier ones (even_batches padding);
  // gather_for_metrics drops them so every sample counts once.
  int64_t padding = 0;

  Tensor& operator[](size_t i) { return fields.at(i); }
  const Tensor& operator[](size_t i) const { return fields.at(i); }
  size_t size() const { return fields.size(); }
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  // Reshuffles: the same epoch gives the same order on every rank.
  void set_epoch(int64_t epoch) { progress_->epoch = epoch; }
  int64_t epoch() const { return progress_->epoch; }
  // Where it is; the Accelerator gives each loader it prepares a progress of its own, which it saves
  // and restores in checkpoints.
  const std::shared_ptr<LoaderProgress>& progress() const { return progress_; }
  void set_progress(std::shared_ptr<LoaderProgress> progress);
  void shard(const ShardOptions& shard);
  const ShardOptions& shard_options() const { return shard_; }
  // Batches are moved to this device as they are produced.
  void set_device(Device device) { device_ = device; }
  Device device() const { return device_; }
  // Each batch produced records its step, the epoch's length and its padding here; the Accelerator
  // gives its prepared loaders one, so accumulate() and gather_for_metrics know where the data is.
  void set_gradient_state(std::shared_ptr<GradientState> state) { gradient_state_ = std::move(state); }

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  int64_t per_rank_batch_size() const;
  int64_t global_batch_size() const { return per_rank_batch_size() * shard_.world_size; }
  // Steps this rank runs per epoch.
  int64_t size() const;

  // The epoch's order of sample indices: a seeded permutation, or 0..N-1 without shuffle.
  const std::vector<int64_t>& epoch_order() const;

  struct StepPlan {
    std::vector<int64_t> indices;  // this rank's sample indices for the step
    int64_t padding = 0;
  };
  StepPlan plan(int64_t step) const;
  // The step's batch on the loader's device; updates the gradient state if one is set.
  Batch batch(int64_t step) const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;

    Iterator(const DataLoader* loader, int64_t step) : loader_(loader), step_(step) {}
    Batch operator*() const { return loader_->batch(step_); }
    Iterator& operator++() {
      ++step_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++step_;
      return before;
    }
    bool operator==(const Iterator& other) const { return step_ == other.step_; }

   private:
    const DataLoader* loader_;
    int64_t step_;
  };
  // The first step is 0, or where a resume of this epoch left off (once), or skip_first_batches's n.
  Iterator begin() const;
  Iterator end() const { return Iterator(this, size()); }

  // This loader, starting every pass at step n (for users who manage their own position; a prepared
  // loader resumed by load_state needs no skipping).
  friend DataLoader skip_first_batches(const DataLoader& loader, int64_t n);

 private:
  bool pads() const;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  ShardOptions shard_;
  // Shared by copies: a copy of a prepared loader (assigned to a member, say) is still the loader
  // whose position the Accelerator saves and restores.
  std::shared_ptr<LoaderProgress> progress_ = std::make_shared<LoaderProgress>();
  int64_t first_step_ = 0;
  Device device_ = Device::cpu();
  std::shared_ptr<GradientState> gradient_state_;
  // epoch_order() of the last epoch asked for, so a step does not redraw the whole permutation.
  mutable std::vector<int64_t> order_cache_;
  mutable int64_t order_cache_epoch_ = -1;
};

DataLoader skip_first_batches(const DataLoader& loader, int64_t n);

// A uniformly random permutation of 0..n-1 drawn from Philox stream (seed, stream).
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace accel
