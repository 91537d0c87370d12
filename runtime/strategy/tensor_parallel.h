// TensorParallel: Megatron-LM's tensor parallelism, with data parallelism around it. The ranks form a
// {dp, tp} mesh (tp innermost, so a group's ranks are adjacent); each tp group splits every layer of
// the model (nn::parallel::TensorParallelModel::parallelize), and the dp replicas of a group average
// their grads with a Reducer over the dp dimension, or, under ZeRO, shard the rank's parts over it
// with a ZeroStrategy: stages 1 and 2 are Megatron's distributed optimizer, stage 3 FSDP2's 2-D
// FSDP x TP. docs/tensor_parallel.md shows one step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective/device_mesh.h"
#include "nn/parallel/partition.h"
#include "runtime/environment.h"
#include "runtime/strategy/reducer.h"
#include "runtime/strategy/strategy.h"
#include "runtime/strategy/zero_strategy.h"

namespace accel {

class TensorParallel final : public Strategy {
 public:
  // Builds the ZeRO stage that shards the parts over the dp ranks, given its communicator.
  using ZeroOverDp = std::function<std::unique_ptr<ZeroStrategy>(std::shared_ptr<Communicator> dp)>;

  // env must have a communicator and outlive the strategy. tp_size must divide the world; dp_size 0
  // takes world / tp_size, else dp_size x tp_size must be the world. zero_over_dp given: ZeRO over dp
  // (on a communicator of its own); empty: the Reducer with options. Collective (builds the mesh).
  TensorParallel(const Environment& env, int tp_size, int dp_size, const ReducerOptions& options,
                 const ZeroOverDp& zero_over_dp = {});
  ~TensorParallel() override;

  // "tensor_parallel", or "tensor_parallel+zero_1" with ZeRO over dp.
  std::string name() const override;
  bool splits_layers() const override { return true; }
  // A model built under DeferredInit: each rank materialises only its parts (see prepare_model).
  bool materializes_parameter_shards() const override { return true; }
  const DeviceMesh& mesh() const { return *mesh_; }

  // Every rank takes rank 0's full model, then its tp group splits it; dp > 1 attaches a reducer over
  // dp. The model must be a nn::parallel::TensorParallelModel (nn::GPT is). Under DeferredInit the
  // ranks check that their models' recipes agree instead, and each materialises its own parts.
  void prepare_model(nn::Module& model) override;
  // The dp coordinate: the ranks of one tp group read the same batch.
  DataShard data_shard() const override;

  // Under ZeRO: its optimizer over this rank's slices of the rank's parts.
  void prepare_optimizer(optim::Optimizer& optimizer) override;

  void before_backward(bool sync) override;
  void after_backward() override;
  void backward_failed() override;

  // Under ZeRO: the shard grads of the parts.
  std::vector<Tensor> local_grads(const std::vector<Tensor>& params) const override;
  // The split parameters' grads differ across the ranks of a group.
  bool grads_replicated() const override { return false; }
  const optim::Optimizer& updating_optimizer(const optim::Optimizer& optimizer) const override;
  // Over the full model: each split parameter's parts summed across tp, each replicated one once
  // (under ZeRO, its dp slices summed first).
  double grad_norm(const std::vector<Tensor>& params, double norm_type) const override;
  void optimizer_step(optim::Optimizer& optimizer) override;
  void zero_grad(optim::Optimizer& optimizer, bool set_to_none) override;

  // The full model's state, the ranks' parts joined (an all-gather over tp per split tensor), under
  // the names of the unsplit model: a checkpoint of any tp loads at any other.
  nn::StateDict model_state_dict(const nn::Module& model) const override;
  nn::LoadResult load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) override;
  optim::StateDict optimizer_state_dict(const optim::Optimizer& optimizer) const override;
  void load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) override;
  // Each rank reads only its parts of the split tensors (TensorParallelPartReader), and under ZeRO
  // what its ZeRO stage reads of them: stage 3 its slices of the model, every stage its slices of the
  // optimizer's state.
  nn::LoadResult load_model_state(nn::Module& model, const StateReader& state, bool strict) override;
  void load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state) override;
  bool model_loads_own_shard() const override { return !zero_ || zero_->model_loads_own_shard(); }
  bool optimizer_loads_own_shard() const override { return !zero_ || zero_->optimizer_loads_own_shard(); }
  // Checkpoints as shards, nothing gathered: each rank of the first dp replica writes its parts; under
  // ZeRO every rank writes its slices of its parts, one run of a part each (under HYBRID_SHARD the
  // first replica's ranks), part tp x S + s of tp x S, where S is ZeRO's parts.
  std::optional<StateShard> model_state_shard(const nn::Module& model) const override;
  std::optional<StateShard> optimizer_state_shard(const optim::Optimizer& optimizer) const override;

 private:
  struct Prepared {
    const nn::Module* model;
    std::map<std::string, nn::parallel::TensorSplit> splits;  // by parameter name
    std::shared_ptr<Reducer> reducer;                         // null with dp 1
  };
  // The split of a parameter of any prepared model, or null for a replicated one.
  const nn::parallel::TensorSplit* split_of(const Tensor& param) const;
  const Prepared& prepared(const nn::Module& model, const char* who) const;
  Tensor join(const Tensor& part, const nn::parallel::TensorSplit& split) const;
  Communicator& tp() const { return mesh_->comm("tp"); }
  // The rank's parts whole (gathered over dp under ZeRO: collective), under the model's names and
  // the optimizer's positional keys.
  nn::StateDict local_model_state(const nn::Module& model) const;
  optim::StateDict local_optimizer_state(const optim::Optimizer& optimizer) const;
  // The split of a state entry, by its key (and shape), or null for a replicated one.
  using SplitFor = std::function<const nn::parallel::TensorSplit*(const std::string& key, const Shape& shape)>;
  SplitFor model_split_for(const nn::Module& model, const char* who) const;
  SplitFor optimizer_split_for(const optim::Optimizer& optimizer) const;
  StateShard shard_of(const nn::StateDict& local, const SplitFor& split_for) const;
  // ZeRO's shard of this rank's parts, each run a PartRun of its part (the padding at its ends cut
  // off); a replicated tensor's runs are written by tp rank 0 only, as every tp rank holds the same.
  StateShard part_runs_of(StateShard zero, const SplitFor& split_for) const;

  const Environment& env_;
  ReducerOptions options_;
  std::unique_ptr<DeviceMesh> mesh_;
  std::vector<Prepared> models_;
  std::unique_ptr<ZeroStrategy> zero_;  // ZeRO over dp, or null (the Reducer)
  // Each split parameter with its split, for the norm and the optimizer's state.
  std::vector<std::pair<Tensor, nn::parallel::TensorSplit>> split_params_;
};

}  // namespace accel
