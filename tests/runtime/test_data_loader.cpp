// DataLoader: seeded shuffles, epochs, drop_last, and sharding by global sample position.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "accel.h"

using namespace accel;

namespace {

std::shared_ptr<TensorDataset> numbered(int64_t n) {
  Tensor x = arange(0.0, static_cast<double>(n), 1.0, DType::f32);
  Tensor y = arange(n);
  return std::make_shared<TensorDataset>(std::vector<Tensor>{reshape(x, {n, 1}), y});
}

std::vector<int64_t> labels(const DataLoader& loader) {
  std::vector<int64_t> seen;
  for (const Batch& batch : loader)
    for (int64_t v : batch[1].to_vector<int64_t>()) seen.push_back(v);
  return seen;
}

}  // namespace

TEST_CASE("batches in order without shuffle; the last batch is short unless drop_last") {
  DataLoader loader(numbered(10), {.batch_size = 4});
  CHECK(loader.size() == 3);
  std::vector<Batch> batches(loader.begin(), loader.end());
  CHECK(batches[0][0].shape() == Shape{4, 1});
  CHECK(batches[2][1].to_vector<int64_t>() == std::vector<int64_t>{8, 9});
  CHECK(batches[2].padding == 0);
  DataLoader dropping(numbered(10), {.batch_size = 4, .drop_last = true});
  CHECK(dropping.size() == 2);
  CHECK(labels(dropping) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("seeded shuffle: a permutation, reproducible, different per epoch and seed") {
  DataLoader a(numbered(50), {.batch_size = 7, .shuffle = true, .seed = 3});
  DataLoader b(numbered(50), {.batch_size = 7, .shuffle = true, .seed = 3});
  const auto first = labels(a);
  CHECK(first == labels(b));
  auto sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) CHECK(sorted[i] == i);
  a.set_epoch(1);
  CHECK(labels(a) != first);
  DataLoader c(numbered(50), {.batch_size = 7, .shuffle = true, .seed = 4});
  CHECK(labels(c) != first);
}

TEST_CASE("shards are disjoint and cover the epoch; even_batches pads from the start") {
  const int world = 3;
  std::vector<int64_t> all;
  int64_t padded = 0;
  for (int rank = 0; rank < world; ++rank) {
    DataLoader loader(numbered(10), {.batch_size = 2, .shuffle = true, .seed = 9});
    loader.shard({.rank = rank, .world_size = world});
    CHECK(loader.size() == 2);  // 10 samples, global batch 6: two steps on every rank
    for (const Batch& batch : loader) {
      auto v = batch[1].to_vector<int64_t>();
      CHECK(v.size() == 2);
      all.insert(all.end(), v.begin(), v.end() - batch.padding);
      padded += batch.padding;
    }
  }
  CHECK(padded == 2);
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("without even_batches the last ranks run fewer or shorter steps") {
  std::vector<int64_t> steps, all;
  for (int rank = 0; rank < 3; ++rank) {
    DataLoader loader(numbered(10), {.batch_size = 2});
    loader.shard({.rank = rank, .world_size = 3, .even_batches = false});
    steps.push_back(loader.size());
    auto v = labels(loader);
    all.insert(all.end(), v.begin(), v.end());
  }
  CHECK(steps == std::vector<int64_t>{2, 2, 1});
  std::sort(all.begin(), all.end());
  CHECK(all.size() == 10);
  CHECK(std::set<int64_t>(all.begin(), all.end()).size() == 10);
}

TEST_CASE("split_batches divides the global batch between ranks") {
  DataLoader loader(numbered(8), {.batch_size = 4});
  loader.shard({.rank = 1, .world_size = 2, .split_batches = true});
  CHECK(loader.per_rank_batch_size() == 2);
  CHECK(labels(loader) == std::vector<int64_t>{2, 3, 6, 7});
  CHECK_THROWS_WITH_AS(loader.shard({.rank = 0, .world_size = 3, .split_batches = true}),
                       "DataLoader::shard: split_batches needs batch_size 4 divisible by the 3 ranks", Error);
}

TEST_CASE("data errors") {
  CHECK_THROWS_WITH_AS(DataLoader(numbered(4), {.batch_size = 0}), "DataLoader: batch_size must be positive, got 0", Error);
  CHECK_THROWS_WITH_AS(TensorDataset({zeros({3, 2}), zeros({4})}), "TensorDataset: field 1 has 4 samples ([4]), field 0 has 3 ([3, 2])", Error);
  DataLoader loader(numbered(4), {.batch_size = 2});
  CHECK_THROWS_WITH_AS(loader.plan(2), "DataLoader: step 2 out of range for 2 steps per epoch", Error);
  CHECK_THROWS_WITH_AS(loader.shard({.rank = 2, .world_size = 2}), "DataLoader::shard: rank 2 is not in a world of 2", Error);
  CHECK_THROWS_WITH_AS(numbered(3)->get(3), "TensorDataset::get: index 3 out of range for 3 samples", Error);
}
