// nn::parallel::ColumnParallelLinear: a Linear whose weight is split on the output dimension, each rank
// of the tensor-parallel group computing its own columns of y = x W^T + b (Megatron-LM's layer).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/split_layer.h"
#include "tensor/generator.h"

namespace accel::nn::parallel {

struct ColumnParallelOptions {
  // All-gather the output columns, so the layer returns the full [..., out] on every rank; false leaves
  // each rank its [..., out / tp], for a RowParallelLinear with input_is_parallel to take.
  bool gather_output = true;
  // The output dim is this many equal blocks stacked (a fused q, k, v projection: 3). Each block is
  // split across the ranks, and a rank holds its part of every block, in block order. With more than
  // one block the local columns are not one range of the full output, so gather_output must be false.
  int64_t fused_blocks = 1;
  // An out_features that does not divide by tp is padded up to a multiple of it with zero rows (an lm
  // head over a vocabulary of any size): the last ranks hold the padding columns, and a gathered
  // output drops them again. Needs fused_blocks 1.
  bool pad_output = false;
};

class ColumnParallelLinear : public Module, public SplitLayer {
 public:
  // Draws the full layer's weights from gen exactly as Linear(in, out, bias, gen) does (leaving gen
  // where that leaves it) and keeps this rank's part: it equals from_full of that Linear.
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, Communicator& tp, Generator& gen,
                       const ColumnParallelOptions& options = {});
  // This rank's part of a full layer's weight and bias, copied or taken (FromFull). out_features must
  // be a multiple of fused_blocks * tp.size(), unless pad_output.
  static std::shared_ptr<ColumnParallelLinear> from_full(const Linear& full, Communicator& tp,
                                                         const ColumnParallelOptions& options = {},
                                                         FromFull how = FromFull::copy);

  std::string type_name() const override { return "ColumnParallelLinear"; }

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }  // of the full layer
  int64_t local_out_features() const { return weight_.size(0); }
  const ColumnParallelOptions& options() const { return options_; }
  Communicator& tp() const override { return *tp_; }
  std::vector<std::pair<std::string, TensorSplit>> parameter_splits() const override;
  const Tensor& weight() const { return weight_; }  // [local_out_features, in]
  const Tensor& bias() const { return bias_; }      // [local_out_features], undefined without bias

 protected:
  // [..., in] replicated -> [..., out] replicated (gather_output) or [..., local_out_features] per rank.
  Tensor forward_impl(const Tensor& x) override;

 private:
  ColumnParallelLinear(const Linear& full, Communicator& tp, const ColumnParallelOptions& options, FromFull how);

  int64_t in_features_, out_features_;
  ColumnParallelOptions options_;
  Communicator* tp_;
  Tensor weight_, bias_;
};

}  // namespace accel::nn::parallel
