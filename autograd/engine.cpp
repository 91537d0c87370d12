// Backward engine: count each node's incoming edges, then run nodes whose grads are complete,
// latest-recorded first, summing grads that meet at the same input.
#include "autograd/engine.h"

#include <fmt/format.h>

#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

using autograd::Edge;
using autograd::Node;

namespace {

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// How many edges point at each node reachable from the roots.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Edge>& root_edges) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const Edge& e : root_edges) {
    if (!e.node) continue;
    ++deps[e.node.get()];
    if (!seen[e.node.get()]) {
      seen[e.node.get()] = true;
      stack.push_back(e.node.get());
    }
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (!seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    }
  }
  return deps;
}

void accumulate_into(std::vector<Tensor>& buffer, uint32_t index, const Tensor& grad) {
  if (index >= buffer.size()) buffer.resize(index + 1);
  buffer[index] = buffer[index].defined() ? nograd::add(buffer[index], grad) : grad;
}

thread_local uint64_t backward_passes = 0;

}  // namespace

uint64_t backward_pass_count() { return backward_passes; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, BackwardOptions options) {
  if (!grad_roots.empty() && grad_roots.size() != roots.size())
    throw Error(fmt::format("backward: got {} roots but {} root grads", roots.size(), grad_roots.size()));
  ++backward_passes;
  NoGradGuard no_grad;  // backward formulas use raw ops; nothing here is recorded

  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    if (!root.defined() || !root.requires_grad())
      throw Error(fmt::format("backward: root {} ({}) does not require grad; did you mark the leaves with "
                              "requires_grad_() and run the forward with grad mode on?",
                              i, root.str()));
    Tensor grad = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!grad.defined()) {
      if (root.numel() != 1)
        throw Error(fmt::format("backward: a grad can only be implied for a one-element root, got {} {}; pass "
                                "grad_roots",
                                root.str(), shape_str(root.shape())));
      grad = ones_like(root);
    } else if (grad.shape() != root.shape()) {
      throw Error(fmt::format("backward: root grad {} does not match root {}", shape_str(grad.shape()),
                              shape_str(root.shape())));
    }
    root_edges.push_back(autograd::gradient_edge(root));
    root_grads.push_back(grad);
  }

  std::unordered_map<Node*, int> deps = count_dependencies(root_edges);
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;

  auto deliver = [&](const Edge& edge, const Tensor& grad) {
    Node* node = edge.node.get();
    keep_alive.emplace(node, edge.node);
    if (grad.defined()) accumulate_into(buffers[node], edge.input_nr, grad);
    if (--deps[node] == 0) ready.push(node);
  };
  for (size_t i = 0; i < root_edges.size(); ++i) deliver(root_edges[i], root_grads[i]);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[node]);
    buffers.erase(node);
    grads.resize(node->outputs.size());
    bool any_defined = false;
    for (const Tensor& g : grads) any_defined |= g.defined();
    std::vector<Tensor> input_grads;
    if (any_defined) {
      for (size_t i = 0; i < grads.size(); ++i)
        if (!grads[i].defined())
          grads[i] = zeros(node->outputs[i].shape, node->outputs[i].dtype, node->outputs[i].device);
      input_grads = node->apply(std::move(grads));
      if (!options.retain_graph) node->release();
    }
    input_grads.resize(node->next_edges.size());
    for (size_t i = 0; i < node->next_edges.size(); ++i)
      if (node->next_edges[i].node) deliver(node->next_edges[i], input_grads[i]);
  }
}

void backward(const Tensor& root, const Tensor& grad_root, BackwardOptions options) {
  backward(std::vector<Tensor>{root}, std::vector<Tensor>{grad_root}, options);
}

}  // namespace accel
