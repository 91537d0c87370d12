// TensorParallelModel: a model that knows how to split itself across a tensor-parallel group
// (nn::GPT does). The TensorParallel strategy calls parallelize on a model the user built whole.
#pragma once

#include "collective/communicator.h"

namespace accel::nn::parallel {

class TensorParallelModel {
 public:
  virtual ~TensorParallelModel() = default;
  // Swaps the model's layers for their tensor-parallel forms over tp, in place: every parameter keeps
  // its name and its handle (Tensor::set_data), now holding this rank's part, so an optimizer built
  // over the whole model steps the parts. Every rank of tp calls it on the same full model. Throws
  // accel::Error, changing nothing, when a size does not divide tp.size() or it is parallel already.
  // tp must outlive the model.
  virtual void parallelize(Communicator& tp) = 0;
  // The group passed to parallelize, or null.
  virtual Communicator* tensor_parallel_group() const = 0;
};

}  // namespace accel::nn::parallel
