// ReadsDescendantParameters: a module whose own forward reads parameters of its descendants directly,
// outside their modules' forward (nn::GPT's tied head reads wte's weight). A strategy that gathers a
// module's parameters only around that module's forward (ZeRO-3's units) keeps these with the reader.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel::nn {

class ReadsDescendantParameters {
 public:
  virtual ~ReadsDescendantParameters() = default;
  virtual std::vector<Tensor> parameters_read_directly() const = 0;
};

}  // namespace accel::nn
