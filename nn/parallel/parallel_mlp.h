// nn::parallel::ParallelMLP: the transformer's feed-forward block with its hidden units split across
// the tensor-parallel group: fc column-parallel, GELU on each rank's units, proj row-parallel
// (Megatron-LM's MLP: one all-reduce forward, one backward).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/parallel/column_parallel_linear.h"
#include "nn/parallel/row_parallel_linear.h"

namespace accel::nn::parallel {

class ParallelMLP : public Module {
 public:
  // This rank's hidden units of a full MLP, copied (fc's rows, proj's columns; the hidden width must
  // be a multiple of tp.size()), or taken (FromFull). drop acts on the replicated output and starts
  // from full's stream.
  static std::shared_ptr<ParallelMLP> from_full(const MLP& full, Communicator& tp, FromFull how = FromFull::copy);

  std::string type_name() const override { return "ParallelMLP"; }

  const std::shared_ptr<ColumnParallelLinear>& fc() const { return fc_; }
  const std::shared_ptr<RowParallelLinear>& proj() const { return proj_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [..., n_embd] replicated -> replicated

 private:
  ParallelMLP(const MLP& full, Communicator& tp, FromFull how);

  std::shared_ptr<ColumnParallelLinear> fc_;
  std::shared_ptr<GELU> act_;
  std::shared_ptr<RowParallelLinear> proj_;
  std::shared_ptr<Dropout> drop_;
};

}  // namespace accel::nn::parallel
