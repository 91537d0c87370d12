// DataParallel: every rank holds the whole model and trains on its own slice of each batch. prepare
// broadcasts rank 0's weights and attaches a bucketed Reducer, whose all-reduces average the grads
// while backward is still running (docs/data_parallel.md).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "runtime/environment.h"
#include "runtime/strategy/reducer.h"
#include "runtime/strategy/strategy.h"

namespace accel {

class DataParallel final : public Strategy {
 public:
  // env must have a communicator and outlive the strategy. The reducers' buckets follow options.
  DataParallel(const Environment& env, const ReducerOptions& options);

  std::string name() const override { return "data_parallel"; }
  void prepare_model(nn::Module& model) override;
  DataShard data_shard() const override;

  void before_backward(bool sync) override;
  void after_backward() override;
  void backward_failed() override;

  // The reducer of a prepared model (its buckets and event log); null for a model not prepared here.
  const Reducer* reducer(const nn::Module& model) const;

 private:
  // Every rank starts from rank 0's parameters and buffers, whatever it initialised itself.
  void broadcast_from_main(const nn::StateDict& entries) const;

  const Environment& env_;
  ReducerOptions options_;
  std::vector<std::pair<const nn::Module*, std::shared_ptr<Reducer>>> reducers_;
};

}  // namespace accel
