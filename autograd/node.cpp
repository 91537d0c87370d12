// Nodes, leaf accumulation and recording of ops into the graph.
#include "autograd/node.h"

#include <fmt/format.h>

#include <atomic>

#include "autograd/grad_mode.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(next_sequence_nr++) {}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs) {
  if (!backward_)
    throw Error(fmt::format("backward: tried to go through {} a second time, but its saved tensors were freed by "
                            "the first backward; pass retain_graph = true to the first backward",
                            name()));
  std::vector<Tensor> grads = backward_(grad_outputs);
  if (grads.size() != next_edges.size())
    throw Error(fmt::format("backward: {} returned {} grads for {} inputs", name(), grads.size(), next_edges.size()));
  return grads;
}

AccumulateGrad::AccumulateGrad(Tensor leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
  outputs.push_back({leaf_.shape(), leaf_.dtype(), leaf_.device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  NoGradGuard no_grad;
  // Moved out, so that a grad nobody else holds (the usual fresh result of a backward formula) is
  // seen as such below.
  Tensor incoming = std::move(grad_outputs.at(0));
  if (incoming.shape() != leaf_.shape())
    throw Error(fmt::format("backward: grad of shape {} for a leaf of shape {}", shape_str(incoming.shape()),
                            shape_str(leaf_.shape())));
  if (incoming.dtype() != leaf_.dtype()) incoming = nograd::to_dtype(incoming, leaf_.dtype());
  if (incoming.device() != leaf_.device()) incoming = nograd::to_device(incoming, leaf_.device());
  AutogradMeta& meta = leaf_.ensure_autograd_meta();
  if (!meta.grad.defined()) {
    // Own the buffer. A contiguous grad that nothing else can reach is kept as it is; any other may
    // alias a tensor the graph or the caller still uses, or be a strided view, so it is copied.
    const bool keep = incoming.is_sole_owner() && incoming.is_contiguous() && incoming.offset() == 0;
    meta.grad = keep ? std::move(incoming) : nograd::clone(incoming);
  } else {
    nograd::add_(meta.grad, incoming);
  }
  meta.grad_ready_hooks.run(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  if (const auto& fn = t.grad_fn()) return {fn, t.autograd_meta()->output_nr};
  if (!t.requires_grad()) return {};
  AutogradMeta& meta = t.ensure_autograd_meta();
  std::shared_ptr<Node> accumulator = meta.grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = accumulator;
  }
  return {accumulator, 0};
}

bool record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  if (!GradMode::is_enabled()) return false;
  bool any = false;
  for (const Tensor& t : inputs) any |= t.defined() && t.requires_grad();
  if (!any) return false;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->outputs.push_back({out.shape(), out.dtype(), out.device()});
    if (!is_floating(out.dtype())) continue;  // integer outputs (argmax) carry no grad
    AutogradMeta& meta = out.ensure_autograd_meta();
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  return true;
}

}  // namespace accel::autograd
