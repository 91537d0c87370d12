// TokenShardLoader: batches of [B, T] token ids from llm.c token shards, read the way llm.c's
// distributed loader reads them (dataloader.h, without shuffling): each step every rank takes the
// next B*T + 1 tokens of its own B*T window in the shard, the targets being the inputs shifted by one,
// then all ranks move on by world * B * T; a shard ends when a whole step no longer fits, and after
// the last shard the first comes again. Shuffled, each pass over the shards (an epoch) takes them in
// an order of its own and a shard's steps in an order of their own, the same on every rank (llm.c's
// should_shuffle permutes shards and samples the same way).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace accel::llmc {

struct TokenBatch {
  Tensor inputs;   // [B, T] i64
  Tensor targets;  // [B, T] i64, inputs shifted by one token
};

class TokenShardLoader {
 public:
  // pattern: a glob of shard files (train_*.bin); rank of world ranks. vocab_size > 0 checks every id.
  // Every shard must hold at least world * B * T + 1 tokens (an Error names the shard otherwise).
  // shuffle_seed: shuffle the shards and the steps, from this seed (every rank passes the same).
  TokenShardLoader(const std::string& pattern, int64_t batch, int64_t seq_len, int rank, int world,
                   int64_t vocab_size = 0, std::optional<uint64_t> shuffle_seed = std::nullopt);

  TokenBatch next_batch();
  // Back to the first step of the first shard.
  void reset();

  size_t shard_count() const { return files_.size(); }
  // The file being read (its index in the sorted pattern), and the passes over all shards so far.
  size_t shard() const { return order_[shard_]; }
  int64_t epoch() const { return epoch_; }
  int64_t step_in_shard() const { return step_; }
  // Steps of world * B * T tokens the current shard holds.
  int64_t steps_in_shard() const;

  // The position, as register_for_checkpointing saves it (the main process's, which all ranks share):
  // the epoch, the shard's place in the epoch's order and the tokens all ranks have consumed of it. A
  // state saved at another world size loads when those tokens are whole steps here.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state);

 private:
  // Reads the shard at place index of the epoch's order.
  void load_shard(size_t index);
  // The epoch's shard order, and the open shard's step order (identity unless shuffled).
  void order_shards();
  void order_steps();

  std::vector<std::string> files_;
  std::optional<uint64_t> shuffle_seed_;
  int64_t epoch_ = 0;
  std::vector<size_t> order_;
  std::vector<int64_t> steps_;
  int64_t batch_, seq_len_, vocab_size_;
  int rank_, world_;
  size_t shard_ = 0;  // the place in order_
  int64_t step_ = 0;
  std::vector<uint16_t> tokens_;
};

}  // namespace accel::llmc
