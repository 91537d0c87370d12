// Dataset: indexed samples made of tensor fields (input, label, ...), and the in-memory TensorDataset.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace accel {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The fields of sample index (for example {image, label}).
  virtual std::vector<Tensor> get(int64_t index) const = 0;
  // The fields of a batch, each stacked along a new first dim. The default stacks get(i);
  // in-memory datasets gather rows directly.
  virtual std::vector<Tensor> get_batch(const std::vector<int64_t>& indices) const;
};

// Samples are rows of tensors that share their first dim.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> fields);
  int64_t size() const override;
  std::vector<Tensor> get(int64_t index) const override;
  std::vector<Tensor> get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<Tensor>& fields() const { return fields_; }

 private:
  std::vector<Tensor> fields_;
};

}  // namespace accel
