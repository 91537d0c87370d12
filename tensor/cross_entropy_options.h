// CrossEntropyOptions: PyTorch's options of cross_entropy (per-class weight, ignore_index, reduction,
// label smoothing), shared by the raw, the differentiable and the nn forms of the loss.
#pragma once

#include <cstdint>

#include "tensor/reduction.h"
#include "tensor/tensor.h"

namespace accel {

// In namespace accel for the reason Reduction is (tensor/reduction.h). The members are in the order of
// PyTorch's F.cross_entropy, so cross_entropy(x, t, {.weight = w, .label_smoothing = 0.1}) reads as there.
struct CrossEntropyOptions {
  // [C] per-class weights of any floating dtype on the logits' device, or undefined: every class 1. A
  // row's loss is scaled by its target's weight, and a mean divides by the sum of the counted targets'
  // weights. No grad flows to the weights.
  Tensor weight = Tensor();
  // Rows whose target is ignore_index add nothing and do not count towards a mean.
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
  // In [0, 1]: the target distribution is (1 - label_smoothing) * onehot + label_smoothing / C.
  double label_smoothing = 0.0;
};

}  // namespace accel
