// TokenShardLoader: each rank's window of a step, and moving between shards.
#include "runtime/llmc/token_loader.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "runtime/llmc/token_shard.h"
#include "tensor/creation.h"

namespace accel::llmc {

TokenShardLoader::TokenShardLoader(const std::string& pattern, int64_t batch, int64_t seq_len, int rank, int world,
                                   int64_t vocab_size)
    : files_(expand_shard_pattern(pattern)), batch_(batch), seq_len_(seq_len), vocab_size_(vocab_size),
      rank_(rank), world_(world) {
  if (batch <= 0 || seq_len <= 0)
    throw Error(fmt::format("TokenShardLoader: batch {} and seq_len {}; expected both > 0", batch, seq_len));
  if (world <= 0 || rank < 0 || rank >= world)
    throw Error(fmt::format("TokenShardLoader: rank {} of {} ranks; expected 0 <= rank < world", rank, world));
  load_shard(0);
}

int64_t TokenShardLoader::steps_in_shard() const {
  return (static_cast<int64_t>(tokens_.size()) - 1) / (world_ * batch_ * seq_len_);
}

void TokenShardLoader::load_shard(size_t index) {
  tokens_ = read_token_shard(files_[index], vocab_size_);
  shard_ = index;
  step_ = 0;
  const int64_t needed = world_ * batch_ * seq_len_ + 1;
  if (static_cast<int64_t>(tokens_.size()) < needed)
    throw Error(fmt::format("TokenShardLoader: {} holds {} tokens; {} ranks x B {} x T {} need at least {}",
                            files_[index], tokens_.size(), world_, batch_, seq_len_, needed));
}

void TokenShardLoader::reset() {
  if (shard_ != 0) load_shard(0);
  step_ = 0;
}

TokenBatch TokenShardLoader::next_batch() {
  if (step_ >= steps_in_shard()) load_shard((shard_ + 1) % files_.size());
  const int64_t n = batch_ * seq_len_;
  const int64_t start = (step_ * world_ + rank_) * n;
  std::vector<int64_t> inputs(static_cast<size_t>(n)), targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    inputs[static_cast<size_t>(i)] = tokens_[static_cast<size_t>(start + i)];
    targets[static_cast<size_t>(i)] = tokens_[static_cast<size_t>(start + i + 1)];
  }
  ++step_;
  return {from_vector(inputs, {batch_, seq_len_}), from_vector(targets, {batch_, seq_len_})};
}

nn::StateDict TokenShardLoader::state_dict() const {
  return {{"shard", scalar_tensor(static_cast<double>(shard_), DType::i64)},
          {"tokens_consumed", scalar_tensor(static_cast<double>(step_ * world_ * batch_ * seq_len_), DType::i64)}};
}

void TokenShardLoader::load_state_dict(const nn::StateDict& state) {
  int64_t shard = -1, consumed = -1;
  for (const auto& [key, t] : state) {
    if (key == "shard") shard = static_cast<int64_t>(t.item());
    else if (key == "tokens_consumed") consumed = static_cast<int64_t>(t.item());
  }
  if (shard < 0 || consumed < 0)
    throw Error("TokenShardLoader::load_state_dict: expected 'shard' and 'tokens_consumed' >= 0");
  if (static_cast<size_t>(shard) >= files_.size())
    throw Error(fmt::format("TokenShardLoader::load_state_dict: shard {}, but the pattern matches {} files", shard,
                            files_.size()));
  const int64_t step_tokens = world_ * batch_ * seq_len_;
  if (consumed % step_tokens != 0)
    throw Error(fmt::format("TokenShardLoader::load_state_dict: {} tokens consumed of shard {} are not whole steps of "
                            "{} ranks x B {} x T {}",
                            consumed, shard, world_, batch_, seq_len_));
  if (static_cast<size_t>(shard) != shard_) load_shard(static_cast<size_t>(shard));
  step_ = consumed / step_tokens;
}

}  // namespace accel::llmc
