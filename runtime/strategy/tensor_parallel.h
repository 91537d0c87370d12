// TensorParallel: Megatron-LM's tensor parallelism, with data parallelism around it. The ranks form a
// {dp, tp} mesh (tp innermost, so a group's ranks are adjacent); each tp group splits every layer of
// the model (nn::parallel::TensorParallelModel::parallelize), and the dp replicas of a group average
// their grads with a Reducer over the dp dimension. docs/tensor_parallel.md shows one step.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective/device_mesh.h"
#include "nn/parallel/partition.h"
#include "runtime/environment.h"
#include "runtime/strategy/reducer.h"
#include "runtime/strategy/strategy.h"

namespace accel {

class TensorParallel final : public Strategy {
 public:
  // env must have a communicator and outlive the strategy. tp_size must divide the world; dp_size 0
  // takes world / tp_size, else dp_size x tp_size must be the world. Collective (builds the mesh).
  TensorParallel(const Environment& env, int tp_size, int dp_size, const ReducerOptions& options);

  std::string name() const override { return "tensor_parallel"; }
  bool splits_layers() const override { return true; }
  const DeviceMesh& mesh() const { return *mesh_; }

  // Every rank takes rank 0's full model, then its tp group splits it; dp > 1 attaches a reducer over
  // dp. The model must be a nn::parallel::TensorParallelModel (nn::GPT is).
  void prepare_model(nn::Module& model) override;
  // The dp coordinate: the ranks of one tp group read the same batch.
  DataShard data_shard() const override;

  void before_backward(bool sync) override;
  void after_backward() override;
  void backward_failed() override;

  // The split parameters' grads differ across the ranks of a group.
  bool grads_replicated() const override { return false; }
  // Over the full model: each split parameter's parts summed across tp, each replicated one once.
  double grad_norm(const std::vector<Tensor>& params, double norm_type) const override;

  // The full model's state, the ranks' parts joined (an all-gather over tp per split tensor), under
  // the names of the unsplit model: a checkpoint of any tp loads at any other.
  nn::StateDict model_state_dict(const nn::Module& model) const override;
  nn::LoadResult load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) override;
  optim::StateDict optimizer_state_dict(const optim::Optimizer& optimizer) const override;
  void load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) override;
  // Checkpoints as shards: each rank of the first dp replica writes its parts, none is gathered.
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
  // full, checked against split, cut to this rank's part; who and name for the error.
  Tensor cut(const Tensor& full, const Tensor& part, const nn::parallel::TensorSplit& split, const char* who,
             const std::string& name) const;
  Communicator& tp() const { return mesh_->comm("tp"); }
  StateShard shard_of(const nn::StateDict& local, const std::function<const nn::parallel::TensorSplit*(
                                                      const std::string& key, const Tensor& t)>& split_for) const;

  const Environment& env_;
  ReducerOptions options_;
  std::unique_ptr<DeviceMesh> mesh_;
  std::vector<Prepared> models_;
  // Each split parameter with its split, for the norm and the optimizer's state.
  std::vector<std::pair<Tensor, nn::parallel::TensorSplit>> split_params_;
};

}  // namespace accel
