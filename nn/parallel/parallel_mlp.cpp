// ParallelMLP: the full MLP's stages with the two Linears swapped for their parallel forms.
#include "nn/parallel/parallel_mlp.h"

#include "nn/parallel/replica.h"

namespace accel::nn::parallel {

ParallelMLP::ParallelMLP(const MLP& full, Communicator& tp, FromFull how) {
  fc_ = register_module("fc", ColumnParallelLinear::from_full(*full.fc(), tp, {.gather_output = false}, how));
  act_ = register_module("act", std::make_shared<GELU>());
  proj_ = register_module("proj", RowParallelLinear::from_full(*full.proj(), tp, {.input_is_parallel = true}, how));
  drop_ = register_module("drop", replica_of(full.drop(), how));
  if (!full.is_training()) eval();
}

std::shared_ptr<ParallelMLP> ParallelMLP::from_full(const MLP& full, Communicator& tp, FromFull how) {
  return std::shared_ptr<ParallelMLP>(new ParallelMLP(full, tp, how));
}

Tensor ParallelMLP::forward_impl(const Tensor& x) { return (*drop_)((*proj_)((*act_)((*fc_)(x)))); }

}  // namespace accel::nn::parallel
