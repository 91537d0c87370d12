// HybridShard: FSDP's HYBRID_SHARD (FSDP2's 2-D mesh, HSDP): ZeRO stage 3 within each shard group,
// replicated across the groups. The ranks form a {dp_replicate, dp_shard} DeviceMesh, dp_shard
// innermost (by default one shard group per node). docs/zero.md, "HYBRID_SHARD".
//
//   4 ranks, 2 x 2:            dp_shard = 0   dp_shard = 1
//          dp_replicate = 0    rank 0         rank 1        shard groups (rows):     {0, 1}, {2, 3}
//          dp_replicate = 1    rank 2         rank 3        replicate groups (cols): {0, 2}, {1, 3}
//
// Everything of stage 3 runs over the shard group's communicator: a rank holds 1/S of every unit's
// parameters, grads and optimizer state (S ranks per group), all-gathers a unit before its forward
// and backward, and reduce-scatters its grads (averaged over the group) as its backward ends. Then,
// once per unit on a backward that syncs, the shard grads are all-reduced (averaged) across the
// replicate group, so each rank holds the average over the whole world of its slice, the same as the
// rank at its dp_shard coordinate in every other group. The optimizer step is stage 3's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/device_mesh.h"
#include "runtime/process_state.h"
#include "runtime/strategy/zero_stage3.h"

namespace accel {

class HybridShard final : public ZeroStage3 {
 public:
  // shard and replicate: this rank's groups along the two dims of a {dp_replicate, dp_shard} mesh
  // (dp_shard innermost), so that this rank is rank replicate.rank() x shard.size() + shard.rank()
  // of the world, and world rank 0 is rank 0 of both. The strategy owns the communicators (its
  // collectives run on their threads). comm_dtype: the dtype f32 grads travel in, in both.
  HybridShard(Device device, std::shared_ptr<Communicator> shard, std::shared_ptr<Communicator> replicate,
              DType comm_dtype, AutoWrapPolicy auto_wrap, bool reshard_after_forward);

  // "hybrid_shard (dp_replicate=2 x dp_shard=2)": the start-up line shows the mesh.
  std::string name() const override;
  // The world rank and size: every rank reads its own part of the data.
  DataShard data_shard() const override;
  void before_backward(bool sync) override;
  // On a syncing backward, one all-reduce (average) of each unit's shard grad across the replicate
  // group, started while backward goes on: once the unit after it in reduce order has started its
  // reduce-scatter, the unit's own is finished and its all-reduce starts on the replicas'
  // communicator. after_backward starts the rest and waits for all.
  void after_backward() override;
  void backward_failed() override;
  // Stage 3's shards over the shard group, written by the ranks of replica 0 only (the others hold
  // the same values).
  std::optional<StateShard> model_state_shard(const nn::Module& model) const override;
  std::optional<StateShard> optimizer_state_shard(const optim::Optimizer& optimizer) const override;

  int shard_size() const { return shard_->size(); }
  int replicas() const { return replicate_->size(); }

 protected:
  // Across the replicate group from the replica holding world rank 0, then within each shard group
  // from its rank 0: every rank ends with world rank 0's values.
  void broadcast_from_main(const nn::StateDict& entries) const override;
  // Across the replicate group, then within the shard group.
  void check_deferred_init(const nn::StateDict& entries) const override;
  // Within the shard group, then across the replicate group.
  void max_over_all_ranks(Tensor& flags) const override;

 private:
  void after_reduce_started(size_t u) override;
  bool averages_replicas() const { return sync_ && replicate_->size() > 1; }
  void start_replica_all_reduce(size_t u);
  // Waits for every started all-reduce and copies the averages into the shard grads; rethrows the
  // first failure once all are waited for.
  void finish_replica_all_reduces();

  struct InFlight {
    Work work;
    Tensor wire;  // a copy of the shard grad (after_backward reads the grad while this runs)
    Tensor grad;
  };

  std::shared_ptr<Communicator> shard_;
  std::shared_ptr<Communicator> replicate_;
  bool sync_ = true;
  std::optional<size_t> last_reduced_;  // this backward's latest unit whose all-reduce waits
  std::vector<bool> started_;           // per unit: its all-reduce started this backward
  std::vector<InFlight> flights_;
};

// Throws accel::Error naming hybrid_shard_size (with its source) and the world size when shard_size
// is negative or, given (> 0), does not divide the data-parallel ranks (world_size over tp_size).
void check_hybrid_shard_size(int shard_size, const std::string& source, int world_size, int tp_size = 1);

// The {dp_replicate, dp_shard} mesh HYBRID_SHARD runs on, over comm (the world). shard_size > 0:
// that many ranks per shard group, which must divide the world; 0: the ranks of one node, which
// needs several nodes of as many ranks each, numbered node by node (else there is no mesh). Throws
// accel::Error on every rank naming the setting (hybrid_shard_size, with its source) and the world.
// Collective over comm.
std::shared_ptr<DeviceMesh> make_hybrid_mesh(Communicator& comm, const ProcessState& process, int shard_size,
                                             const std::string& source);

// The ranks per shard group when hybrid_shard_size is not given: the data-parallel ranks of one node,
// its local_world_size over tp_size (the {dp, tp} mesh keeps a tp group's ranks adjacent, so a node's
// dp ranks are consecutive in every tp coordinate's dp group). Needs several nodes of as many ranks
// each, numbered node by node, each holding whole tp groups. Throws accel::Error on every rank naming
// the setting (with its source) and the world. Collective over world.
int node_shard_size(Communicator& world, const ProcessState& process, const std::string& source, int tp_size);

// A strategy over mesh's dp_shard and dp_replicate communicators, which stay alive with it.
std::unique_ptr<HybridShard> make_hybrid_shard(Device device, const std::shared_ptr<DeviceMesh>& mesh,
                                               DType comm_dtype, AutoWrapPolicy auto_wrap,
                                               bool reshard_after_forward);

}  // namespace accel
