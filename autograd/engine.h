// The backward engine: walks the graph from the roots in reverse recording order and
// accumulates grads into the leaves.
#pragma once

#include <cstdint>
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

// How many backward passes this thread has started. Hooks that fire several times within one pass
// (one per leaf) tell passes apart by it.
uint64_t backward_pass_count();

}  // namespace accel
