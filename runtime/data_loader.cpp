// DataLoader: step s of rank r takes global positions [s*G + r*b, s*G + (r+1)*b) of the epoch's
// order, where b is the per-rank batch and G = b * world; positions past the end are padding.
#include "runtime/data_loader.h"

#include <fmt/format.h>

#include <algorithm>

#include <numeric>

#include "collective/timeline.h"
#include "kernels/philox.h"
#include "tensor/nograd/copy.h"

namespace accel {

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates, one 32-bit Philox word per swap; the bias of the multiply-shift is below 2^-31 per
  // draw for the sizes a loader sees.
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t k = static_cast<uint64_t>(n - 1 - i);
    const uint32_t word = philox4x32(seed, k / 4, stream).v[k % 4];
    const int64_t j = static_cast<int64_t>((static_cast<uint64_t>(word) * static_cast<uint64_t>(i + 1)) >> 32);
    std::swap(order[i], order[j]);
  }
  return order;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (!dataset_) throw Error("DataLoader: got a null dataset");
  if (options_.batch_size <= 0)
    throw Error(fmt::format("DataLoader: batch_size must be positive, got {}", options_.batch_size));
}

void DataLoader::shard(const ShardOptions& shard) {
  if (shard.world_size <= 0 || shard.rank < 0 || shard.rank >= shard.world_size)
    throw Error(fmt::format("DataLoader::shard: rank {} is not in a world of {}", shard.rank, shard.world_size));
  if (shard.split_batches && options_.batch_size % shard.world_size != 0)
    throw Error(fmt::format("DataLoader::shard: split_batches needs batch_size {} divisible by the {} ranks",
                            options_.batch_size, shard.world_size));
  shard_ = shard;
}

bool DataLoader::pads() const { return shard_.even_batches && shard_.world_size > 1; }

int64_t DataLoader::per_rank_batch_size() const {
  return shard_.split_batches ? options_.batch_size / shard_.world_size : options_.batch_size;
}

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size(), global = global_batch_size();
  if (options_.drop_last) return n / global;
  const int64_t steps = (n + global - 1) / global;
  if (pads() || steps == 0) return steps;
  // Without padding, a rank whose slice of the last step starts past the end has one step less.
  const int64_t last_start = (steps - 1) * global + shard_.rank * per_rank_batch_size();
  return last_start < n ? steps : steps - 1;
}

const std::vector<int64_t>& DataLoader::epoch_order() const {
  const int64_t n = dataset_->size();
  if (order_cache_epoch_ == progress_->epoch && static_cast<int64_t>(order_cache_.size()) == n) return order_cache_;
  if (options_.shuffle) {
    order_cache_ = random_permutation(n, options_.seed, static_cast<uint64_t>(progress_->epoch));
  } else {
    order_cache_.resize(static_cast<size_t>(n));
    std::iota(order_cache_.begin(), order_cache_.end(), int64_t{0});
  }
  order_cache_epoch_ = progress_->epoch;
  return order_cache_;
}

DataLoader::StepPlan DataLoader::plan(int64_t step) const {
  if (step < 0 || step >= size())
    throw Error(fmt::format("DataLoader: step {} out of range for {} steps per epoch", step, size()));
  const std::vector<int64_t>& order = epoch_order();
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t b = per_rank_batch_size();
  const int64_t first = step * global_batch_size() + shard_.rank * b;
  StepPlan plan;
  for (int64_t p = first; p < first + b; ++p) {
    if (p < n) {
      plan.indices.push_back(order[p]);
    } else if (pads()) {
      plan.indices.push_back(order[(p - n) % n]);
      ++plan.padding;
    }
  }
  return plan;
}

Batch DataLoader::batch(int64_t step) const {
  const timeline::Span span("data loading", "data");
  StepPlan p = plan(step);
  Batch batch{dataset_->get_batch(p.indices), p.padding};
  for (Tensor& field : batch.fields) field = nograd::to_device(field, device_);
  progress_->steps_done = step + 1;
  if (gradient_state_) {
    ++gradient_state_->batches;
    gradient_state_->step = step;
    gradient_state_->steps_per_epoch = size();
    gradient_state_->padding = p.padding;
  }
  return batch;
}

void DataLoader::set_progress(std::shared_ptr<LoaderProgress> progress) {
  if (!progress) throw Error("DataLoader::set_progress: got a null progress");
  progress_ = std::move(progress);
}

DataLoader::Iterator DataLoader::begin() const {
  int64_t start = first_step_;
  if (progress_->resume_epoch == progress_->epoch) {
    start = std::max(start, progress_->resume_step);
    progress_->resume_epoch = -1;  // only the first pass over the resumed epoch starts late
  }
  return Iterator(this, std::min(start, size()));
}

DataLoader skip_first_batches(const DataLoader& loader, int64_t n) {
  if (n < 0) throw Error(fmt::format("skip_first_batches: n must be >= 0, got {}", n));
  DataLoader skipping = loader;
  skipping.first_step_ = n;
  return skipping;
}

}  // namespace accel
