// The backward engine: walks the graph from the roots in reverse recording order and
// accumulates grads into the leaves.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace accel {

struct BackwardOptions {
  // Keep the saved tensors so the same graph can be walked again.
  bool retain_graph = false;
};

// d roots / d leaves, seeded with grad_roots (ones for a one-element root when empty).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              BackwardOptions options = {});
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), BackwardOptions options = {});

}  // namespace accel
