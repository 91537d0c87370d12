// nn::parallel::RowParallelLinear: a Linear whose weight is split on the input dimension; each rank
// multiplies its part of the input, and the partial products are summed across the group (Megatron-LM's
// layer).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/split_layer.h"
#include "tensor/generator.h"

namespace accel::nn::parallel {

struct RowParallelOptions {
  // The input is already this rank's [..., in / tp] (a ColumnParallelLinear's output without
  // gather_output); false scatters a replicated [..., in] first.
  bool input_is_parallel = false;
};

class RowParallelLinear : public Module, public SplitLayer {
 public:
  // Draws the full layer's weights from gen exactly as Linear(in, out, bias, gen) does (leaving gen
  // where that leaves it) and keeps this rank's part: it equals from_full of that Linear.
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, Communicator& tp, Generator& gen,
                    const RowParallelOptions& options = {});
  // This rank's columns of a full layer's weight and the whole bias, copied or taken (FromFull).
  // in_features must be a multiple of tp.size().
  static std::shared_ptr<RowParallelLinear> from_full(const Linear& full, Communicator& tp,
                                                      const RowParallelOptions& options = {},
                                                      FromFull how = FromFull::copy);

  std::string type_name() const override { return "RowParallelLinear"; }

  int64_t in_features() const { return in_features_; }  // of the full layer
  int64_t out_features() const { return out_features_; }
  int64_t local_in_features() const { return weight_.size(1); }
  const RowParallelOptions& options() const { return options_; }
  Communicator& tp() const override { return *tp_; }
  std::vector<std::pair<std::string, TensorSplit>> parameter_splits() const override;
  const Tensor& weight() const { return weight_; }  // [out, in / tp]
  // [out], the same on every rank: added once, after the sum over the group.
  const Tensor& bias() const { return bias_; }

 protected:
  // [..., in / tp] per rank (input_is_parallel) or [..., in] replicated -> [..., out] replicated.
  Tensor forward_impl(const Tensor& x) override;

 private:
  RowParallelLinear(const Linear& full, Communicator& tp, const RowParallelOptions& options, FromFull how);

  int64_t in_features_, out_features_;
  RowParallelOptions options_;
  Communicator* tp_;
  Tensor weight_, bias_;
};

}  // namespace accel::nn::parallel
