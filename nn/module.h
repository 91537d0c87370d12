// nn::Module: the base of every layer. It owns named parameters, buffers and child modules in
// registration order; their dotted names ("blocks.0.attn.qkv.weight") are the checkpoint keys.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/hook_list.h"
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

class Module;

// Called before forward_impl with the module and its input.
using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
// Called after forward_impl; it may replace output (with an identity op whose backward does more, say).
using ForwardHook = std::function<void(Module& module, const Tensor& input, Tensor& output)>;
// Called in backward once every parameter of the module (its children's included) has its grad.
using BackwardHook = std::function<void(Module& module)>;
// Opens a scope around each forward: what it adds to `held` (an RAII token, such as an autocast
// guard) lives until that forward returns or throws.
using ForwardScope = std::function<void(Module& module, std::vector<std::shared_ptr<void>>& held)>;

class Module {
 public:
  Module() = default;
  virtual ~Module();
  // Modules are shared through pointers: copying one would alias its parameters.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type's name for messages, e.g. "Linear".
  virtual std::string type_name() const { return "Module"; }

  // Enters the forward scopes, runs the forward-pre hooks, forward_impl, then the forward hooks. However a module is called
  // (forward, operator(), a parent's forward), its hooks run.
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Hooks, each removed again by its handle. Strategies use them to act around a unit's forward and
  // backward (a ZeRO-3 unit gathers its parameters before forward and frees them after), so they are
  // the one tie between nn and the runtime.
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  HookHandle register_forward_hook(ForwardHook hook);
  // The scope is entered before the forward-pre hooks and left after the forward hooks.
  HookHandle register_forward_scope(ForwardScope scope);
  // Fires at most once per backward pass, when the last of the module's parameters (those it has
  // now) gets its grad; a pass that leaves some parameter without a grad does not fire it. Throws for
  // a module without parameters.
  HookHandle register_backward_hook(BackwardHook hook);

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

  // Swaps the child named name for module, in its place among the children (a parallel form of a
  // layer for the full one, say). Throws accel::Error when there is no such child or module is null.
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

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
  // A meta tensor (a model built under DeferredInit) takes its state tensor as its init instead, held
  // and read when the model is materialised (by prepare: each rank reads only its slices).
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

 protected:
  // The computation itself. Single-input modules override it; others (losses take two) add entry
  // points of their own. The default throws.
  virtual Tensor forward_impl(const Tensor& input);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // Throws when a parameter or buffer of this module itself is still a meta tensor (DeferredInit).
  void check_materialised() const;
  void check_new_name(const char* what, const std::string& name) const;
  void collect_parameters(const std::string& prefix, StateDict& out) const;
  void collect_buffers(const std::string& prefix, StateDict& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);

  StateDict parameters_;
  StateDict buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  HookList<void(Module&, std::vector<std::shared_ptr<void>>&)> forward_scopes_;
  HookList<void(Module&, const Tensor&)> forward_pre_hooks_;
  HookList<void(Module&, const Tensor&, Tensor&)> forward_hooks_;
  // The grad-ready hooks that backward hooks put on the parameters, which may outlive this module:
  // the destructor removes them.
  struct BackwardHookState;
  std::vector<std::shared_ptr<BackwardHookState>> backward_hooks_;
};

}  // namespace accel::nn
