// Strategy: how a model is spread over the ranks. The Accelerator hands every model and optimizer it
// prepares to one Strategy, calls it around each backward and each optimizer step, and asks it for
// norms and for checkpoint state. SingleDevice and DataParallel are the first two; ZeRO 1/2/3 (FSDP)
// and tensor parallelism are each one more subclass. docs/architecture.md shows a step through it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nn/module.h"
#include "nn/parallel/partition.h"
#include "optim/optimizer.h"
#include "runtime/state_reader.h"
#include "tensor/hook_list.h"
#include "tensor/tensor.h"

namespace accel {

// Which slice of the data this rank reads: its place among the data-parallel replicas. Ranks of one
// tensor-parallel group read the same data.
struct DataShard {
  int rank = 0;
  int world_size = 1;
};

// A run of a full tensor's elements in row-major order: elements [offset, offset + n) of a tensor of
// full_shape, held as a 1-D tensor of n elements. A ZeRO rank's flat slice holds one such run of each
// parameter (it may start and end mid-row).
struct ElementRun {
  int64_t offset = 0;
  Shape full_shape;
};

// A run of a tensor-parallel part's elements: elements [offset, offset + n) of rank `part`'s part (of
// part_shape) of a tensor split as split, held as a 1-D tensor. A ZeRO rank's flat slice of its part is
// one such run, however many rows of the full tensor it crosses (a split along dim 1 cuts each row).
struct PartRun {
  nn::parallel::TensorSplit split;
  int part = 0;
  Shape part_shape;
  int64_t offset = 0;
};

// Where an entry of a StateShard lies in its full tensor: whole (std::monostate: the same on every
// part, written once), this part's share under a tensor-parallel split, a run of its elements, or a
// run of a part's elements.
using ShardPlace = std::variant<std::monostate, nn::parallel::TensorSplit, ElementRun, PartRun>;

// This rank's share of a state that the ranks save in files of their own (a checkpoint's shards with
// global offsets) rather than gathered: each tensor of local with its place in the full tensor. Rank
// `part` of `parts` holds the part; of the ranks that hold the same part (data-parallel replicas), one
// is the writer.
struct StateShard {
  nn::StateDict local;
  std::vector<ShardPlace> places;  // one per entry of local
  int part = 0;
  int parts = 1;
  bool writer = true;
  // Per entry of local, or empty for none: a run that another part writes (a replicated tensor's ZeRO
  // run on the tensor-parallel ranks past 0), held only so that this rank can read its own state back.
  std::vector<bool> written_elsewhere;
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // "single_device", "data_parallel", ...
  virtual std::string name() const = 0;
  // Whether it takes models with tensor-parallel layers (nn::parallel::SplitLayer): the others keep
  // every parameter whole and refuse them in prepare.
  virtual bool splits_layers() const { return false; }
  // Whether prepare_model takes meta parameters (a model built under DeferredInit) and materialises
  // only this rank's shard of them. Otherwise the Accelerator materialises them whole first.
  virtual bool materializes_parameter_shards() const { return false; }

  // --- prepare --------------------------------------------------------------------------------
  // Places the model on the device, makes every rank start from the same state, and installs what
  // runs around its forward and backward (a reducer's grad-ready hooks; a sharded strategy's unit
  // hooks, see hook_units). Collective; each model once.
  virtual void prepare_model(nn::Module& model) = 0;
  // An optimizer over prepared models' parameters: a sharded strategy partitions its state here.
  virtual void prepare_optimizer(optim::Optimizer& optimizer);
  virtual DataShard data_shard() const = 0;

  // --- each backward --------------------------------------------------------------------------
  // Around the engine's walk in Accelerator::backward. sync is false on the early micro-steps of an
  // accumulation window and inside no_sync(): then grads stay local, to be synced by a later backward.
  virtual void before_backward(bool sync);
  virtual void after_backward();
  // The engine threw: forget this backward's half-finished communication.
  virtual void backward_failed();

  // --- each optimizer step --------------------------------------------------------------------
  // The grads this rank holds for params: the whole grads when they are replicated, this rank's
  // shards when they are sharded. The precision unscales and checks these; norms are taken over them.
  virtual std::vector<Tensor> local_grads(const std::vector<Tensor>& params) const;
  // Whether, once a synced backward is done, every data-parallel rank holds the same whole grad in
  // each parameter's grad() (so comparing them across ranks finds a rank that diverged). False where
  // each rank keeps only its shard of the averaged grads.
  virtual bool grads_replicated() const { return true; }
  // The optimizer whose state the update of a prepared optimizer builds: optimizer itself, or the
  // one a sharded strategy runs over this rank's shards.
  virtual const optim::Optimizer& updating_optimizer(const optim::Optimizer& optimizer) const { return optimizer; }
  // The norm_type-norm (inf allowed) of the grads of params over every rank's local grads,
  // accumulated in f64. Collective for a sharded strategy.
  virtual double grad_norm(const std::vector<Tensor>& params, double norm_type) const;
  // The update of a prepared optimizer, once its grads are final and the precision let it through.
  // Replicated: the optimizer's own update. Sharded: the shard's update, then the parameters' gather.
  virtual void optimizer_step(optim::Optimizer& optimizer);
  virtual void zero_grad(optim::Optimizer& optimizer, bool set_to_none);

  // --- checkpoints ----------------------------------------------------------------------------
  // The model's full, unsharded state (gathered where it is sharded), on every rank.
  virtual nn::StateDict model_state_dict(const nn::Module& model) const;
  // Loads full state, each rank keeping what it holds (its shards where sharded).
  virtual nn::LoadResult load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict);
  // Loads a full state read through state (a file's, a checkpoint's shards'). The default reads all of
  // it on every rank and calls load_model_state_dict; a strategy that shards the parameters reads only
  // its slices.
  virtual nn::LoadResult load_model_state(nn::Module& model, const StateReader& state, bool strict);
  virtual optim::StateDict optimizer_state_dict(const optim::Optimizer& optimizer) const;
  virtual void load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state);
  // The same for an optimizer's state (positional keys): the default reads all of it.
  virtual void load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state);
  // Whether load_model_state (load_optimizer_state) reads only the runs that this rank's
  // model_state_shard (optimizer_state_shard) holds, so that what the rank holds can be put back from
  // its own shard alone, without a gather.
  virtual bool model_loads_own_shard() const { return false; }
  virtual bool optimizer_loads_own_shard() const { return false; }
  // For a strategy whose checkpoints are per-rank shards: this rank's share of the model's (or the
  // optimizer's, positional keys) state. nullopt (the default): the checkpoint holds the full state
  // of model_state_dict, written by rank 0. Either way load_*_state_dict gets the full state.
  virtual std::optional<StateShard> model_state_shard(const nn::Module& model) const;
  virtual std::optional<StateShard> optimizer_state_shard(const optim::Optimizer& optimizer) const;

 protected:
  // Combines the partial norms of the ranks: each passes sum |g|^p over its local grads (or max |g|
  // for the inf-norm). Replicated grads: the local value is the global one already.
  virtual double combine_norm(double local, bool inf_norm) const;
  // sum |g|^p over grads (or max |g| for the inf-norm), in f64.
  static double norm_power(const std::vector<Tensor>& grads, double norm_type);

  // For strategies that act per unit of a model (ZeRO-3 gathers a unit's parameters before its
  // forward and frees them after; FSDP reduce-scatters a unit's grads once its backward is done):
  // registers module hooks on each unit that call the three functions below. The hooks are removed
  // with the strategy.
  void hook_units(const std::vector<nn::Module*>& units);
  virtual void before_unit_forward(nn::Module& unit);
  // May replace output, e.g. with an identity whose backward gathers the unit's parameters again.
  virtual void after_unit_forward(nn::Module& unit, Tensor& output);
  virtual void after_unit_backward(nn::Module& unit);

 private:
  std::vector<HookHandle> unit_hooks_;
};

class Communicator;

// Every rank takes rank 0's values of entries, through comm_for(tensor): contiguous ones in place,
// others through a contiguous copy. Each broadcast is named "<who> broadcast of <name>" in the ledger.
void broadcast_from_rank0(const nn::StateDict& entries, const std::function<Communicator&(const Tensor&)>& comm_for,
                          const char* who);

}  // namespace accel
