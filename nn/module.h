// nn::Module: the base of every layer. It owns named parameters, buffers and child modules in
// registration order; their dotted names ("blocks.0.attn.qkv.weight") are the checkpoint keys.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace accel::nn {

// An ordered list of (name, tensor): a module's or optimizer's state, ready for a checkpoint file.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// What a non-strict load_state_dict left out.
struct LoadResult {
  std::vector<std::string> missing;     // the module's keys the state did not have
  std::vector<std::string> unexpected;  // the state's keys the module does not have
  std::vector<std::string> mismatched;  // keys present in both but with different shapes
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules are shared through pointers: copying one would alias its parameters.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type's name for messages, e.g. "Linear".
  virtual std::string type_name() const { return "Module"; }

  // Single-input modules override forward; others (GPT takes indices, losses take two) may add
  // their own entry points. The default throws.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Registers a trainable leaf (marking it requires_grad) and returns it. Names are unique within a
  // module and contain no '.'.
  Tensor register_parameter(const std::string& name, Tensor tensor);
  // Registers state that is saved and moved with the module but not trained (running stats, say).
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Own entries first, then each child's with "child." prefixed, in registration order.
  StateDict named_parameters() const;
  std::vector<Tensor> parameters() const;
  StateDict named_buffers() const;
  // This module (named "") and every descendant, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The direct children.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Parameters then buffers. The tensors are the live ones, not copies.
  StateDict state_dict() const;
  // Copies values into the existing tensors (casting dtype, crossing devices), so every handle to
  // a parameter stays valid. Strict: throws one Error naming every missing, unexpected and
  // mis-shaped key, and changes nothing. Non-strict: loads the keys that match, returns the rest.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Drops every parameter's grad (set_to_none) or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  // Moves parameters and buffers / casts floating ones, in place via Tensor::set_data, so handles
  // held elsewhere (an optimizer's) see the new data. Grads that no longer fit are dropped.
  void to(Device device);
  void to(DType dtype);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const char* what, const std::string& name) const;
  void collect_parameters(const std::string& prefix, StateDict& out) const;
  void collect_buffers(const std::string& prefix, StateDict& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);

  StateDict parameters_;
  StateDict buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace accel::nn
