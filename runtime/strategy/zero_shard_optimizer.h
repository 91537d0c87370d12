// ShardOptimizer: the user's optimizer run on this rank's shards only (ZeRO stage 1). It is an
// optimizer of the same kind and settings (Optimizer::make_like) over the rank's slice of each unit,
// so its state (momentum, Adam's moments) exists for 1/N of the model. A unit's slice is cut into one
// segment per parameter (the run of its elements the slice holds, empty where it holds none), so each
// parameter keeps its own group's settings and its own state and step count, as under DDP: a parameter
// no rank gave a grad since zero_grad is skipped, not updated with a zero grad.
// The user keeps calling step() on their own optimizer, which never holds state itself.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "optim/optimizer.h"
#include "runtime/strategy/strategy.h"
#include "runtime/strategy/zero_flat_unit.h"

namespace accel {

class ShardOptimizer {
 public:
  // shards[u] is unit u's slice, a leaf whose grad the strategy sets to the averaged shard grad.
  // Every parameter of user must lie in one of units, and every unit's parameters in user; the
  // errors name strategy ("zero_3").
  ShardOptimizer(optim::Optimizer& user, std::vector<const FlatUnit*> units, std::vector<Tensor> shards,
                 const std::string& strategy);

  optim::Optimizer& user() const { return user_; }
  const std::vector<const FlatUnit*>& units() const { return units_; }
  // The optimizer over the shards: it holds the state.
  const optim::Optimizer& shard_optimizer() const { return *shard_optimizer_; }
  // The bytes of the shards' state (Adam's moments, SGD's momentum).
  int64_t state_bytes() const;
  // One update of every shard, at the user optimizer's current lr (an LR schedule sets it there).
  // has_grad[u][j]: whether parameter j of units()[u] has a grad on some rank (the same on every
  // rank); a parameter without one is skipped, as an optimizer skips a parameter whose grad is None.
  void step(const std::vector<std::vector<bool>>& has_grad);

  // The user's optimizer's state in its own layout ("lr", "state.<i>.<slot>" with full tensors shaped
  // like its parameters), gathered from every rank's shards. Collective over comm.
  optim::StateDict full_state_dict(Communicator& comm) const;
  // Takes this rank's slices of such a full state (so a state saved on N ranks loads on M).
  void load_full_state_dict(const optim::StateDict& state);
  // The same through a reader, reading only the runs this rank's slices hold.
  void load_state(const StateReader& state);
  // This rank's share of full_state_dict, with no collective, for a checkpoint of per-rank shards: the
  // same keys in the same order, each tensor slot of a parameter as the run of its elements that this
  // rank's slices hold (an ElementRun in the parameter's shape; empty when they hold none of it), and
  // "lr", the counts (every rank holds every parameter's) and the groups' keys whole. part and parts
  // are left for the strategy to set.
  StateShard state_shard() const;

 private:
  // Parameter `param` of unit's slice: elements [start, start + length) of the unit's shard (its
  // held run; the unit's last parameter also takes the padding after it), updated by the shard
  // optimizer as one parameter of the user's group `group`.
  struct Segment {
    size_t unit = 0, param = 0;
    int64_t start = 0, length = 0;
    size_t group = 0;
    Tensor tensor;
  };

  void cut_segments();
  // A new shard optimizer over the segments, at the user's current settings (fresh state).
  void build_shard_optimizer();
  // The shard optimizer's state by segment: (slot, tensor) for each segment that has state.
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> segment_state() const;

  optim::Optimizer& user_;
  std::vector<const FlatUnit*> units_;
  std::vector<Tensor> shards_;
  std::vector<Segment> segments_;
  std::shared_ptr<optim::Optimizer> shard_optimizer_;
  std::vector<size_t> segment_of_param_;  // the shard optimizer's parameters lie in group order
  std::vector<size_t> segment_of_user_;   // per user parameter: its segment (unit and position)
};

}  // namespace accel
