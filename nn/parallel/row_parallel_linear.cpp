// RowParallelLinear: this rank's input columns of the weight, the local product without bias, g, and
// the bias added to the sum.
#include "nn/parallel/row_parallel_linear.h"

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/tp_mappings.h"
#include "tensor/nograd/copy.h"

namespace accel::nn::parallel {

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, Communicator& tp,
                                     Generator& gen, const RowParallelOptions& options)
    : RowParallelLinear(Linear(in_features, out_features, bias, gen), tp, options, FromFull::copy) {}

RowParallelLinear::RowParallelLinear(const Linear& full, Communicator& tp, const RowParallelOptions& options,
                                     FromFull how)
    : in_features_(full.in_features()), out_features_(full.out_features()), options_(options), tp_(&tp) {
  divide_by_tp("RowParallelLinear", "in_features", in_features_, tp.size());
  weight_ = register_parameter("weight", adopt_part(full.weight(), rank_part(full.weight(), 1, 1, tp.rank(), tp.size()), how));
  if (full.bias().defined())
    bias_ = register_parameter("bias", how == FromFull::copy ? nograd::clone(full.bias()) : full.bias());
}

std::vector<std::pair<std::string, TensorSplit>> RowParallelLinear::parameter_splits() const {
  return {{"weight", TensorSplit{.dim = 1, .blocks = 1, .full_size = in_features_}}};
}

std::shared_ptr<RowParallelLinear> RowParallelLinear::from_full(const Linear& full, Communicator& tp,
                                                                const RowParallelOptions& options, FromFull how) {
  return std::shared_ptr<RowParallelLinear>(new RowParallelLinear(full, tp, options, how));
}

Tensor RowParallelLinear::forward_impl(const Tensor& x) {
  const int64_t expected = options_.input_is_parallel ? local_in_features() : in_features_;
  if (x.dim() < 1 || x.size(-1) != expected)
    throw Error(fmt::format("RowParallelLinear: input must be [..., {}] ({}), got {}", expected,
                            options_.input_is_parallel ? "this rank's part, input_is_parallel"
                                                       : "the full input, replicated",
                            shape_str(x.shape())));
  const Tensor part = options_.input_is_parallel ? x : scatter_to_tp_region(x, *tp_);
  const Tensor y = reduce_from_tp_region(linear(part, weight_, Tensor()), *tp_);
  return bias_.defined() ? y + autocast::to_compute(bias_) : y;
}

}  // namespace accel::nn::parallel
