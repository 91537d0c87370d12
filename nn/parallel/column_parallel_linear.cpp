// ColumnParallelLinear: this rank's output rows of the weight, f before the product and, with
// gather_output, the all-gather of the columns after it.
#include "nn/parallel/column_parallel_linear.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/tp_mappings.h"

namespace accel::nn::parallel {

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, Communicator& tp,
                                           Generator& gen, const ColumnParallelOptions& options)
    : ColumnParallelLinear(Linear(in_features, out_features, bias, gen), tp, options, FromFull::copy) {}

ColumnParallelLinear::ColumnParallelLinear(const Linear& full, Communicator& tp, const ColumnParallelOptions& options,
                                           FromFull how)
    : in_features_(full.in_features()), out_features_(full.out_features()), options_(options), tp_(&tp) {
  if (options.fused_blocks < 1)
    throw Error(fmt::format("ColumnParallelLinear: fused_blocks must be at least 1, got {}", options.fused_blocks));
  if (options.fused_blocks > 1 && options.gather_output)
    throw Error(fmt::format("ColumnParallelLinear: gather_output needs fused_blocks 1, got {}: a rank's columns of {} "
                            "stacked blocks are not one range of the output",
                            options.fused_blocks, options.fused_blocks));
  if (options.fused_blocks > 1 && options.pad_output)
    throw Error(fmt::format("ColumnParallelLinear: pad_output needs fused_blocks 1, got {}", options.fused_blocks));
  const int64_t blocks = options.fused_blocks, size = tp.size();
  if (!options.pad_output) {
    if (blocks == 1) {
      divide_by_tp("ColumnParallelLinear", "out_features", out_features_, size);
    } else if (out_features_ % (blocks * size) != 0) {
      throw Error(fmt::format("ColumnParallelLinear: out_features {} is not a multiple of fused_blocks {} x the "
                              "tensor-parallel size {}",
                              out_features_, blocks, size));
    }
  }
  const TensorSplit split{.dim = 0, .blocks = blocks, .full_size = out_features_};
  weight_ = register_parameter(
      "weight", adopt_part(full.weight(), split_part(full.weight(), split, tp.rank(), tp.size()), how));
  if (full.bias().defined())
    bias_ = register_parameter("bias",
                               adopt_part(full.bias(), split_part(full.bias(), split, tp.rank(), tp.size()), how));
}

std::vector<std::pair<std::string, TensorSplit>> ColumnParallelLinear::parameter_splits() const {
  const TensorSplit split{.dim = 0, .blocks = options_.fused_blocks, .full_size = out_features_};
  std::vector<std::pair<std::string, TensorSplit>> splits{{"weight", split}};
  if (bias_.defined()) splits.emplace_back("bias", split);
  return splits;
}

std::shared_ptr<ColumnParallelLinear> ColumnParallelLinear::from_full(const Linear& full, Communicator& tp,
                                                                      const ColumnParallelOptions& options,
                                                                      FromFull how) {
  return std::shared_ptr<ColumnParallelLinear>(new ColumnParallelLinear(full, tp, options, how));
}

Tensor ColumnParallelLinear::forward_impl(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != in_features_)
    throw Error(fmt::format("ColumnParallelLinear: input must be [..., {}], got {}", in_features_,
                            shape_str(x.shape())));
  const Tensor y = linear(copy_to_tp_region(x, *tp_), weight_, bias_);
  if (!options_.gather_output) return y;
  const Tensor gathered = gather_from_tp_region(y, *tp_);
  return gathered.size(-1) == out_features_ ? gathered : narrow(gathered, gathered.dim() - 1, 0, out_features_);
}

}  // namespace accel::nn::parallel
