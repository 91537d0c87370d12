// Node: one recorded op in the backward graph. It maps the grads of its outputs to the grads of
// its inputs, which flow along its edges to the nodes that produced them (or to leaf accumulators).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace accel::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no grad
  uint32_t input_nr = 0;       // which output of `node` the grad belongs to
};

// Shape, dtype and device of an output, so a missing grad can be filled with zeros.
struct OutputInfo {
  Shape shape;
  DType dtype;
  Device device;
};

class Node {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grad_outputs[i] is the grad of output i (never undefined: the engine fills zeros).
  // Returns one grad per next edge; undefined where no grad flows.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // Drops what backward saved, after a backward without retain_graph.
  virtual void release() {}
  virtual bool is_released() const { return false; }

  const std::string& name() const { return name_; }
  // Later nodes run first, so the backward order follows the forward in reverse.
  uint64_t sequence_nr() const { return sequence_nr_; }

  std::vector<Edge> next_edges;
  std::vector<OutputInfo> outputs;

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

// A node whose backward is a closure over the (detached) tensors it saved.
class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardFn backward) : Node(std::move(name)), backward_(std::move(backward)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release() override { backward_ = nullptr; }
  bool is_released() const override { return !backward_; }

 private:
  BackwardFn backward_;
};

// Sums incoming grads into a leaf's .grad, then runs the leaf's grad-ready hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// The edge through which a grad for t flows: t's grad_fn, t's accumulator if it is a leaf that
// requires grad, or an empty edge.
Edge gradient_edge(const Tensor& t);

// When grad mode is on and any input requires grad: makes a FunctionNode with edges to the
// inputs, and makes it the grad_fn of each output. Returns whether it recorded.
bool record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);

}  // namespace accel::autograd
