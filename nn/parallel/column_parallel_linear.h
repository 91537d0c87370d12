// nn::parallel::ColumnParallelLinear: a Linear whose weight is split on the output dimension, each rank
// of the tensor-parallel group computing its own columns of y = x W^T + b (Megatron-LM's layer).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/linear.h"
#include "nn/module.h"
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
};

class ColumnParallelLinear : public Module {
 public:
  // Draws the full layer's weights from gen exactly as Linear(in, out, bias, gen) does (leaving gen
  // where that leaves it) and keeps this rank's part: it equals from_full of that Linear.
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, Communicator& tp, Generator& gen,
                       const ColumnParallelOptions& options = {});
  // This rank's part of a full layer's weight and bias, copied. out_features must be a multiple of
  // fused_blocks * tp.size().
  static std::shared_ptr<ColumnParallelLinear> from_full(const Linear& full, Communicator& tp,
                                                         const ColumnParallelOptions& options = {});

  std::string type_name() const override { return "ColumnParallelLinear"; }

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }  // of the full layer
  int64_t local_out_features() const { return weight_.size(0); }
  const ColumnParallelOptions& options() const { return options_; }
  Communicator& tp() const { return *tp_; }
  const Tensor& weight() const { return weight_; }  // [out / tp, in]
  const Tensor& bias() const { return bias_; }      // [out / tp], undefined without bias

 protected:
  // [..., in] replicated -> [..., out] replicated (gather_output) or [..., out / tp] per rank.
  Tensor forward_impl(const Tensor& x) override;

 private:
  ColumnParallelLinear(const Linear& full, Communicator& tp, const ColumnParallelOptions& options);

  int64_t in_features_, out_features_;
  ColumnParallelOptions options_;
  Communicator* tp_;
  Tensor weight_, bias_;
};

}  // namespace accel::nn::parallel
