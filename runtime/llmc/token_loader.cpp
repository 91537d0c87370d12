// TokenShardLoader: each rank's window of a step, moving between shards, and their shuffled orders.
#include "runtime/llmc/token_loader.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "runtime/llmc/token_shard.h"
#include "tensor/creation.h"

namespace accel::llmc {

namespace {

// splitmix64: a counter-based stream, the same on every rank and platform for the same key.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 0..n-1 in order without a seed, else shuffled (Fisher-Yates) by a stream keyed by the seed and which.
template <class T>
std::vector<T> permutation(size_t n, std::optional<uint64_t> seed, uint64_t which) {
  std::vector<T> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  if (!seed) return p;
  const uint64_t key = mix(*seed) ^ which;
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[mix(key ^ mix(i)) % i]);
  return p;
}

}  // namespace

TokenShardLoader::TokenShardLoader(const std::string& pattern, int64_t batch, int64_t seq_len, int rank, int world,
                                   int64_t vocab_size, std::optional<uint64_t> shuffle_seed)
    : files_(expand_shard_pattern(pattern)), shuffle_seed_(shuffle_seed), batch_(batch), seq_len_(seq_len),
      vocab_size_(vocab_size), rank_(rank), world_(world) {
  if (batch <= 0 || seq_len <= 0)
    throw Error(fmt::format("TokenShardLoader: batch {} and seq_len {}; expected both > 0", batch, seq_len));
  if (world <= 0 || rank < 0 || rank >= world)
    throw Error(fmt::format("TokenShardLoader: rank {} of {} ranks; expected 0 <= rank < world", rank, world));
  order_shards();
  load_shard(0);
}

void TokenShardLoader::order_shards() {
  order_ = permutation<size_t>(files_.size(), shuffle_seed_, mix(static_cast<uint64_t>(epoch_)));
}

void TokenShardLoader::order_steps() {
  const uint64_t which = mix(static_cast<uint64_t>(epoch_)) ^ mix(~static_cast<uint64_t>(order_[shard_]));
  steps_ = permutation<int64_t>(static_cast<size_t>(steps_in_shard()), shuffle_seed_, which);
}

int64_t TokenShardLoader::steps_in_shard() const {
  return (static_cast<int64_t>(tokens_.size()) - 1) / (world_ * batch_ * seq_len_);
}

void TokenShardLoader::load_shard(size_t index) {
  const std::string& file = files_[order_[index]];
  tokens_ = read_token_shard(file, vocab_size_);
  shard_ = index;
  step_ = 0;
  const int64_t needed = world_ * batch_ * seq_len_ + 1;
  if (static_cast<int64_t>(tokens_.size()) < needed)
    throw Error(fmt::format("TokenShardLoader: {} holds {} tokens; {} ranks x B {} x T {} need at least {}", file,
                            tokens_.size(), world_, batch_, seq_len_, needed));
  order_steps();
}

void TokenShardLoader::reset() {
  const bool reorder = epoch_ != 0;
  epoch_ = 0;
  if (reorder) order_shards();
  if (shard_ != 0 || reorder) load_shard(0);
  step_ = 0;
}

TokenBatch TokenShardLoader::next_batch() {
  if (step_ >= steps_in_shard()) {
    if (shard_ + 1 == files_.size()) {
      ++epoch_;
      order_shards();
    }
    load_shard((shard_ + 1) % files_.size());
  }
  const int64_t n = batch_ * seq_len_;
  const int64_t start = (steps_[static_cast<size_t>(step_)] * world_ + rank_) * n;
  std::vector<int64_t> inputs(static_cast<size_t>(n)), targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    inputs[static_cast<size_t>(i)] = tokens_[static_cast<size_t>(start + i)];
    targets[static_cast<size_t>(i)] = tokens_[static_cast<size_t>(start + i + 1)];
  }
  ++step_;
  return {from_vector(inputs, {batch_, seq_len_}), from_vector(targets, {batch_, seq_len_})};
}

nn::StateDict TokenShardLoader::state_dict() const {
  return {{"epoch", scalar_tensor(static_cast<double>(epoch_), DType::i64)},
          {"shard", scalar_tensor(static_cast<double>(shard_), DType::i64)},
          {"tokens_consumed", scalar_tensor(static_cast<double>(step_ * world_ * batch_ * seq_len_), DType::i64)}};
}

void TokenShardLoader::load_state_dict(const nn::StateDict& state) {
  int64_t epoch = 0, shard = -1, consumed = -1;  // a state from before shuffling has no epoch: 0
  for (const auto& [key, t] : state) {
    if (key == "epoch") epoch = static_cast<int64_t>(t.item());
    else if (key == "shard") shard = static_cast<int64_t>(t.item());
    else if (key == "tokens_consumed") consumed = static_cast<int64_t>(t.item());
  }
  if (epoch < 0 || shard < 0 || consumed < 0)
    throw Error("TokenShardLoader::load_state_dict: expected 'epoch', 'shard' and 'tokens_consumed' >= 0");
  if (static_cast<size_t>(shard) >= files_.size())
    throw Error(fmt::format("TokenShardLoader::load_state_dict: shard {}, but the pattern matches {} files", shard,
                            files_.size()));
  const int64_t step_tokens = world_ * batch_ * seq_len_;
  if (consumed % step_tokens != 0)
    throw Error(fmt::format("TokenShardLoader::load_state_dict: {} tokens consumed of shard {} are not whole steps of "
                            "{} ranks x B {} x T {}",
                            consumed, shard, world_, batch_, seq_len_));
  const bool reorder = epoch != epoch_;
  epoch_ = epoch;
  if (reorder) order_shards();
  if (static_cast<size_t>(shard) != shard_ || reorder) load_shard(static_cast<size_t>(shard));
  if (consumed / step_tokens > steps_in_shard())
    throw Error(fmt::format("TokenShardLoader::load_state_dict: {} tokens consumed of shard {}, which holds {} steps of "
                            "{} ranks x B {} x T {}",
                            consumed, shard, steps_in_shard(), world_, batch_, seq_len_));
  step_ = consumed / step_tokens;
}

}  // namespace accel::llmc
