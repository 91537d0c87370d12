// nn::Module: registration, the dotted-name walk, state dicts, mode switches and in-place moves.
#include "nn/module.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "nn/state_match.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel::nn {

namespace {

std::string prefixed(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

struct Module::BackwardHookState {
  std::vector<HookHandle> param_hooks;
  void remove() {
    for (HookHandle& h : param_hooks) h.remove();
  }
};

Module::~Module() {
  for (const auto& state : backward_hooks_) state->remove();
}

Tensor Module::forward_impl(const Tensor&) {
  throw Error(fmt::format("{}::forward: this module does not take a single tensor input", type_name()));
}

void Module::check_materialised() const {
  auto check = [&](const StateDict& entries, const char* what) {
    for (const auto& [name, t] : entries)
      if (t.is_meta())
        throw Error(fmt::format("{}::forward: {} '{}' ({} {}) is not materialised: the module was built under "
                                "accel::DeferredInit (init_empty_weights); give it to Accelerator::prepare, or call "
                                "nn::materialize, before running it",
                                type_name(), what, name, dtype_name(t.dtype()), shape_str(t.shape())));
  };
  check(parameters_, "parameter");
  check(buffers_, "buffer");
}

Tensor Module::forward(const Tensor& input) {
  check_materialised();
  std::vector<std::shared_ptr<void>> held;  // the scopes' tokens, released on return or throw
  forward_scopes_.run(*this, held);
  forward_pre_hooks_.run(*this, input);
  Tensor output = forward_impl(input);
  forward_hooks_.run(*this, input, output);
  return output;
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) { return forward_pre_hooks_.add(std::move(hook)); }

HookHandle Module::register_forward_hook(ForwardHook hook) { return forward_hooks_.add(std::move(hook)); }

HookHandle Module::register_forward_scope(ForwardScope scope) { return forward_scopes_.add(std::move(scope)); }

HookHandle Module::register_backward_hook(BackwardHook hook) {
  const std::vector<Tensor> params = parameters();
  if (params.empty())
    throw Error(fmt::format("{}::register_backward_hook: the module has no parameters, so no grad would fire it",
                            type_name()));
  // Which pass the count belongs to, so a pass that stopped short does not count towards the next.
  struct Progress {
    uint64_t pass = 0;
    size_t ready = 0;
  };
  auto progress = std::make_shared<Progress>();
  auto fire = std::make_shared<BackwardHook>(std::move(hook));
  auto state = std::make_shared<BackwardHookState>();
  const size_t total = params.size();
  for (const Tensor& p : params) {
    // `this` stays valid: the destructor removes these hooks from parameters that outlive the module.
    state->param_hooks.push_back(p.add_grad_ready_hook([this, progress, fire, total](Tensor&) {
      const uint64_t pass = backward_pass_count();
      if (progress->pass != pass) *progress = {pass, 0};
      if (++progress->ready == total) (*fire)(*this);
    }));
  }
  backward_hooks_.push_back(state);
  std::weak_ptr<BackwardHookState> weak = state;
  return HookHandle([weak] {
    if (auto s = weak.lock()) s->remove();
  });
}

void Module::check_new_name(const char* what, const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(fmt::format("{}: name '{}' must be non-empty and contain no '.'", what, name));
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  if (taken(parameters_) || taken(buffers_) || taken(children_))
    throw Error(fmt::format("{}: {} already has an entry named '{}'", what, type_name(), name));
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor) {
  check_new_name("register_parameter", name);
  if (!tensor.defined()) throw Error(fmt::format("register_parameter: '{}' is an undefined tensor", name));
  if (!tensor.is_leaf())
    throw Error(fmt::format("register_parameter: '{}' was computed by a recorded op; register a leaf (detach it)",
                            name));
  if (!is_floating(tensor.dtype()))
    throw Error(fmt::format("register_parameter: '{}' is {}, expected a floating dtype", name,
                            dtype_name(tensor.dtype())));
  tensor.requires_grad_(true);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name("register_buffer", name);
  if (!tensor.defined()) throw Error(fmt::format("register_buffer: '{}' is an undefined tensor", name));
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  if (!module) throw Error(fmt::format("register_module: '{}' is a null module", name));
  children_.emplace_back(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) throw Error(fmt::format("replace_module: '{}' is a null module", name));
  for (auto& [child_name, child] : children_)
    if (child_name == name) {
      child = std::move(module);
      return;
    }
  throw Error(fmt::format("replace_module: {} has no child named '{}'", type_name(), name));
}

void Module::collect_parameters(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : parameters_) out.emplace_back(prefixed(prefix, name), t);
  for (const auto& [name, child] : children_) child->collect_parameters(prefixed(prefix, name), out);
}

void Module::collect_buffers(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : buffers_) out.emplace_back(prefixed(prefix, name), t);
  for (const auto& [name, child] : children_) child->collect_buffers(prefixed(prefix, name), out);
}

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (const auto& [name, child] : children_) child->collect_modules(prefixed(prefix, name), out);
}

StateDict Module::named_parameters() const {
  StateDict out;
  collect_parameters("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& entry : named_parameters()) out.push_back(std::move(entry.second));
  return out;
}

StateDict Module::named_buffers() const {
  StateDict out;
  collect_buffers("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

StateDict Module::state_dict() const {
  StateDict out = named_parameters();
  collect_buffers("", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  for (const auto& [name, t] : state)
    if (!t.defined()) throw Error(fmt::format("load_state_dict: '{}' is an undefined tensor", name));
  const StateDict own = state_dict();
  std::vector<NamedShape> own_shapes, given_shapes;
  for (const auto& [name, t] : own) own_shapes.push_back({name, t.shape()});
  for (const auto& [name, t] : state) given_shapes.push_back({name, t.shape()});
  const StateMatch match = match_state(own_shapes, given_shapes, strict, type_name());
  for (const auto& [mine, theirs] : match.fits)
    if (state[theirs].second.is_meta())
      throw Error(fmt::format("{}::load_state_dict: '{}' of the state is a meta tensor (built under DeferredInit): it "
                              "has no values to load; materialise its model first",
                              type_name(), state[theirs].first));
  NoGradGuard no_grad;
  for (const auto& [mine, theirs] : match.fits) {
    const Tensor& target = own[mine].second;
    // A meta tensor (DeferredInit) takes the state's tensor as its init: materialising reads it then,
    // only the elements each rank keeps (PyTorch's load_state_dict(assign=True) on a meta module).
    if (target.is_meta())
      record_fill(target, FillRecipe::from_source(tensor_element_source(state[theirs].second, state[theirs].first,
                                                                        "a state dict in memory")));
    else
      nograd::copy_(target, state[theirs].second);
  }
  return match.result;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& entry : children_) entry.second->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    if (set_to_none) p.set_grad(Tensor());
    else if (p.grad().defined()) nograd::zero_(p.grad());
  }
}

namespace {

// Applies convert to each distinct tensor of the state (a tensor registered twice moves once) and
// to its grad, swapping the data in place.
template <class F>
void convert_in_place(const StateDict& state, F&& convert) {
  NoGradGuard no_grad;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& entry : state) {
    const Tensor& t = entry.second;
    if (!seen.insert(t.impl()).second) continue;
    const Tensor data = convert(t);
    if (data.is_same(t)) continue;
    const Tensor grad = t.grad().defined() ? convert(t.grad()) : Tensor();
    t.set_data(data);
    if (grad.defined()) t.set_grad(grad);
  }
}

}  // namespace

void Module::to(Device device) {
  // A meta tensor moves as a meta tensor (its recipe goes along), to be materialised on device.
  convert_in_place(state_dict(), [&](const Tensor& t) {
    if (t.is_meta()) return t.device() == device ? t : meta_to_device(t, device);
    return nograd::to_device(t, device);
  });
}

void Module::to(DType dtype) {
  if (!is_floating(dtype))
    throw Error(fmt::format("Module::to: parameters can only be cast to a floating dtype, got {}", dtype_name(dtype)));
  for (const auto& [name, t] : state_dict())
    if (t.is_meta() && is_floating(t.dtype()) && t.dtype() != dtype)
      throw Error(fmt::format("Module::to: '{}' is a meta tensor ({} {}, built under accel::DeferredInit); a cast to "
                              "{} would change the values its initialiser gives, so cast after it is materialised",
                              name, dtype_name(t.dtype()), shape_str(t.shape()), dtype_name(dtype)));
  // Integer buffers (counts, indices) keep their dtype.
  convert_in_place(state_dict(),
                   [&](const Tensor& t) { return is_floating(t.dtype()) ? nograd::to_dtype(t, dtype) : t; });
}

}  // namespace accel::nn
