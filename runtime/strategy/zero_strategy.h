// ZeroStrategy: what the ZeRO stages share (docs/zero.md). Each prepared model is cut into FlatUnits;
// each rank keeps the averaged grad of its slice of every unit (its shard grad), and a ShardOptimizer
// updates its slices only. ZeroStage12 (optimizer state, then grads, sharded) and ZeroStage3
// (parameters too) differ in when grads are reduce-scattered and whether parameters stay whole.
// Under bf16/fp16 (shard_masters_in) the model's parameters and grads are 16-bit and the f32 masters
// exist only as each rank's slices: the ShardOptimizer updates those, and their 16-bit rounding is
// what is gathered.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "collective/work.h"
#include "runtime/strategy/strategy.h"
#include "runtime/strategy/zero_flat_unit.h"
#include "runtime/strategy/zero_shard_optimizer.h"
#include "tensor/hook_list.h"

namespace accel {

class ZeroStrategy : public Strategy {
 public:
  // comm: the strategy's own communicator (its collectives run on its thread). comm_dtype: the
  // dtype grads travel in (grad_comm_dtype): f32 grads rounded to it, or under sharded masters 16-bit
  // grads widened to f32, whose averaged slice then stays f32.
  ZeroStrategy(int stage, Device device, std::shared_ptr<Communicator> comm, DType comm_dtype);
  ~ZeroStrategy() override;

  int stage() const { return stage_; }
  // Under mixed_precision bf16/fp16: each unit's f32 parameters become a 16-bit flat buffer (what
  // forward reads, and what is gathered and reduce-scattered), and the f32 masters exist only as this
  // rank's slices. Call before prepare_model; dtype f32 (the default) keeps the masters whole.
  void shard_masters_in(DType dtype);
  DType model_dtype() const { return model_dtype_; }
  std::string name() const override;  // "zero_1", "zero_2", "zero_3"
  DataShard data_shard() const override;
  void prepare_optimizer(optim::Optimizer& optimizer) override;

  // The shard grads of the units holding params: the slices every rank's precision unscales and
  // every norm is taken over.
  std::vector<Tensor> local_grads(const std::vector<Tensor>& params) const override;
  bool grads_replicated() const override { return false; }
  // Per parameter of params whose elements this rank's slices hold some of: the parameter and the run
  // of its elements in the rank's shard grad (the f32 master's grad where that is apart). For a norm
  // that weighs parameters differently (a tensor-parallel model's split and replicated ones).
  std::vector<std::pair<Tensor, Tensor>> local_grad_runs(const std::vector<Tensor>& params) const;
  // Element-wise op of values over the ranks holding the other slices of this rank's units (the
  // shard group under HYBRID_SHARD, whose replicas hold the same slices); nothing with no other.
  // For a norm taken over the slices by the strategy around this one (TensorParallel's).
  void reduce_over_slices(Tensor& values, ReduceOp op, const char* what) const;
  // The ShardOptimizer's optimizer over this rank's slices.
  const optim::Optimizer& updating_optimizer(const optim::Optimizer& optimizer) const override;
  void optimizer_step(optim::Optimizer& optimizer) override;
  void zero_grad(optim::Optimizer& optimizer, bool set_to_none) override;
  // Gathered to the user's layout (collective), and sliced back to this rank's shards.
  optim::StateDict optimizer_state_dict(const optim::Optimizer& optimizer) const override;
  // Full f32 weights, gathered from every rank's master slices (collective), under stage 3 and where
  // the masters are sharded; otherwise the model's own state.
  nn::StateDict model_state_dict(const nn::Module& model) const override;
  // Into the model's parameters, and each rank's f32 master slices from the state exactly.
  nn::LoadResult load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) override;
  void load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) override;
  // Reads only the runs of this rank's slices.
  void load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state) override;
  bool optimizer_loads_own_shard() const override { return true; }
  // Checkpoints as per-rank shards, with no collective: rank r of N writes part r, the runs of each
  // parameter's elements (and of each optimizer slot's) that its flat slices hold, in the parameter's
  // full shape; part 0 also the buffers and counts. The padding is never written.
  std::optional<StateShard> model_state_shard(const nn::Module& model) const override;
  std::optional<StateShard> optimizer_state_shard(const optim::Optimizer& optimizer) const override;

  // The units of a prepared model, in the order their collectives run.
  std::vector<const FlatUnit*> units_of(const nn::Module& model) const;

  // The bytes this rank holds now for the prepared models' parameters (gathered buffers and shards),
  // gradients (full flat grads, grads of their own, shard grads, the f32 masters' grads), the f32
  // master slices where they are apart from the parameters, and optimizer state (the shards'), to set
  // against ZeRO's formulas (bench/zero_memory).
  struct HeldBytes {
    int64_t parameters = 0, gradients = 0, master_weights = 0, optimizer_state = 0;
  };
  HeldBytes held_bytes() const;

 protected:
  // One all-reduce of the shards' partial norms (sum of |g|^p, or max for the inf-norm).
  double combine_norm(double local, bool inf_norm) const override;

  struct Unit {
    std::unique_ptr<FlatUnit> flat;
    const nn::Module* model = nullptr;
    // This rank's slice of the parameters: what the ShardOptimizer updates (a leaf whose grad is
    // shard_grad). Stages 1 and 2: a view of flat->full(); stage 3: a tensor of its own.
    Tensor shard;
    // What the ShardOptimizer updates: shard itself, or under sharded masters an f32 copy of the
    // slice (a leaf of its own), whose grad is shard_grad in f32 from the sync until the step.
    Tensor master;
    // The averaged grad of the slice, since the last zero_grad; undefined before the first sync.
    // Stage 1: a view of flat->full_grad() after a sync.
    Tensor shard_grad;
    // An in-flight reduce-scatter or all-reduce: its Work, its input (kept alive), its output.
    Work work;
    Tensor wire_in, wire_out;
    // Per parameter: a backward on this rank reached it since the last zero_grad that set grads to
    // None (DDP's "the grad is defined"). The step skips a parameter no rank reached.
    std::vector<bool> has_grad;
  };

  Communicator& comm() const { return *comm_; }
  DType comm_dtype() const { return comm_dtype_; }
  Device device() const { return device_; }
  // Every rank takes rank 0's values (virtual: a hybrid mesh broadcasts across its replicas too).
  virtual void broadcast_from_main(const nn::StateDict& entries) const;
  // Collective: refuses on every rank a model whose deferred-init (meta) entries differ from rank 0's
  // (they are never broadcast: each rank materialises its slices from its own recipes). Virtual: a
  // hybrid mesh checks across its replicas too.
  virtual void check_deferred_init(const nn::StateDict& entries) const;
  // Adds a unit of model over params; stage 3 passes a shard of its own (see Unit::shard).
  Unit& add_unit(const nn::Module& model, const std::string& name, const nn::StateDict& params);
  // Starts averaging flat_grad (a flat tensor of the unit's layout) across the ranks, each rank
  // receiving its slice. finish_reduce_scatter waits for it and adds the slice to shard_grad
  // (stage 1 replaces it: its flat grads hold everything since zero_grad). shard_grad is in the
  // grads' dtype, or in the wire's where that is wider (16-bit grads averaged in f32).
  void start_reduce_scatter(Unit& unit, const Tensor& flat_grad);
  void finish_reduce_scatter(Unit& unit, bool add);
  // Stage 1: reduce-scatters the unit's full flat grad in place, so the averaged slice lands in this
  // rank's own part of it, and the rest is zeroed; shard_grad becomes that part, a view. So stage 1
  // holds no grad buffer beyond the full grads (4Ψ + 4Ψ + 8Ψ/N in all) and sends 2Ψ with the
  // all-gather. A slice averaged at an earlier sync since zero_grad is carried aside by
  // carry_synced_slice before the next backward and added back here, so syncing twice sums as DDP.
  // A wire wider than the grads (16-bit grads, f32 wire) is a copy: the f32 slice becomes a
  // shard_grad of its own and the whole flat grad is zeroed.
  void start_slice_reduce_scatter(Unit& unit);
  void finish_slice_reduce_scatter(Unit& unit);
  void carry_synced_slice(Unit& unit);
  // Under sharded masters: the unit's master becomes an f32 copy of its slice and the flat buffer
  // 16-bit; shard becomes the 16-bit slice (own_shard: a tensor of its own, stage 3's; else a view of
  // the buffer). Otherwise master is shard. Call once the flat buffer holds the starting values.
  void split_master(Unit& unit, bool own_shard);
  static bool has_own_master(const Unit& unit) { return unit.master.defined() && unit.master.impl() != unit.shard.impl(); }
  // At a sync: every own master's grad becomes its shard grad in f32 (what the precision unscales,
  // the norm is taken over and the step reads); dropped again after the step.
  void refresh_master_grads();
  // The f32 master slices of model's units from a full state (names of model's parameters).
  void load_masters(const nn::Module& model, const nn::StateDict& state);
  // After the shards' update: stages 1 and 2 all-gather the parameters, stage 3 waits for the next
  // forward.
  virtual void after_shard_update(Unit& unit) = 0;
  // flat_grad in the dtype it travels in (itself where that is its dtype).
  Tensor wire_of(const Tensor& flat_grad) const;
  // Whether the wire is wider than the unit's grads (16-bit grads reduce-scattered in f32).
  bool widens(const Unit& unit) const { return dtype_size(comm_dtype_) > dtype_size(unit.flat->dtype()); }
  // Forgets half-finished reduce-scatters (a backward that threw).
  void wait_all_quietly();
  // Element-wise max of flags over every rank of the job (virtual: a hybrid mesh reduces across its
  // replicas too).
  virtual void max_over_all_ranks(Tensor& flags) const;

  // unique_ptrs: ShardOptimizers and hooks keep pointers to the units.
  std::vector<std::unique_ptr<Unit>> units_;

 private:
  int stage_;
  Device device_;
  std::shared_ptr<Communicator> comm_;
  DType comm_dtype_;
  DType model_dtype_ = DType::f32;
  std::vector<std::unique_ptr<ShardOptimizer>> optimizers_;
  std::vector<HookHandle> reach_hooks_;  // set Unit::has_grad
  // The units o updates, in its order.
  std::vector<Unit*> units_in(const ShardOptimizer& o) const;
  // Per unit of o: which of its parameters some rank reached since zero_grad. Collective: one
  // all-reduce (max) of a flag per parameter.
  std::vector<std::vector<bool>> params_with_grad(const ShardOptimizer& o) const;
};

}  // namespace accel
