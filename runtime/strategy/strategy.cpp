// Strategy: the replicated defaults (what SingleDevice and DataParallel share), the norm over local
// grads, and the unit hooks.
#include "runtime/strategy/strategy.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "collective/communicator.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/optim_ops.h"
#include "tensor/nograd/views.h"

namespace accel {

void broadcast_from_rank0(const nn::StateDict& entries, const std::function<Communicator&(const Tensor&)>& comm_for,
                          const char* who) {
  NoGradGuard no_grad;
  for (const auto& [name, t] : entries) {
    const Tensor sent = t.is_contiguous() ? t : nograd::contiguous(t);
    comm_for(sent).broadcast(sent, 0, fmt::format("{} broadcast of {}", who, name));
    if (!sent.is_same(t)) nograd::copy_(t, sent);
  }
}

Strategy::~Strategy() {
  for (HookHandle& hook : unit_hooks_) hook.remove();
}

void Strategy::prepare_optimizer(optim::Optimizer&) {}
void Strategy::before_backward(bool) {}
void Strategy::after_backward() {}
void Strategy::backward_failed() {}

std::vector<Tensor> Strategy::local_grads(const std::vector<Tensor>& params) const {
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

double Strategy::norm_power(const std::vector<Tensor>& grads, double norm_type) {
  return nograd::grad_norm_power(grads, norm_type);
}

double Strategy::grad_norm(const std::vector<Tensor>& params, double norm_type) const {
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  const double total = combine_norm(norm_power(local_grads(params), norm_type), inf);
  return inf ? total : std::pow(total, 1.0 / norm_type);
}

double Strategy::combine_norm(double local, bool) const { return local; }

void Strategy::optimizer_step(optim::Optimizer& optimizer) { optimizer.apply_update(); }

void Strategy::zero_grad(optim::Optimizer& optimizer, bool set_to_none) { optimizer.clear_grads(set_to_none); }

nn::StateDict Strategy::model_state_dict(const nn::Module& model) const { return model.state_dict(); }

nn::LoadResult Strategy::load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) {
  return model.load_state_dict(state, strict);
}

nn::LoadResult Strategy::load_model_state(nn::Module& model, const StateReader& state, bool strict) {
  return load_model_state_dict(model, state.read_all(), strict);
}

void Strategy::load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state) {
  load_optimizer_state_dict(optimizer, state.read_all());
}

optim::StateDict Strategy::optimizer_state_dict(const optim::Optimizer& optimizer) const {
  return optimizer.state_dict();
}

void Strategy::load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) {
  optimizer.load_state_dict(state);
}

std::optional<StateShard> Strategy::model_state_shard(const nn::Module&) const { return std::nullopt; }

std::optional<StateShard> Strategy::optimizer_state_shard(const optim::Optimizer&) const { return std::nullopt; }

void Strategy::hook_units(const std::vector<nn::Module*>& units) {
  for (nn::Module* unit : units) {
    unit_hooks_.push_back(unit->register_forward_pre_hook([this](nn::Module& m, const Tensor&) { before_unit_forward(m); }));
    unit_hooks_.push_back(
        unit->register_forward_hook([this](nn::Module& m, const Tensor&, Tensor& out) { after_unit_forward(m, out); }));
    unit_hooks_.push_back(unit->register_backward_hook([this](nn::Module& m) { after_unit_backward(m); }));
  }
}

void Strategy::before_unit_forward(nn::Module&) {}
void Strategy::after_unit_forward(nn::Module&, Tensor&) {}
void Strategy::after_unit_backward(nn::Module&) {}

}  // namespace accel
