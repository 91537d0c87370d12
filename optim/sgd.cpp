// optim::SGD: batches parameters by group and by whether their momentum buffer exists, then calls the
// fused update once per batch.
#include "optim/sgd.h"

#include <fmt/format.h>

#include <map>

#include "autograd/grad_mode.h"
#include "tensor/nograd/optim_ops.h"

namespace accel::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr, sgd_slots(options)), options_(options) {
  check_options();
}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), options.lr, sgd_slots(options), {"weight_decay", "dampening"}), options_(options) {
  check_options();
}

std::vector<Optimizer::Slot> SGD::sgd_slots(const SGDOptions& options) {
  return options.momentum != 0.0 ? std::vector<Slot>{{"momentum_buffer", false}} : std::vector<Slot>{};
}

void SGD::check_options() const {
  if (options_.momentum < 0.0 || options_.weight_decay < 0.0)
    throw Error(fmt::format("SGD: momentum {} and weight_decay {} must be >= 0", options_.momentum,
                            options_.weight_decay));
  for (size_t g = 0; g < num_groups(); ++g) {
    const SGDOptions o = group_options(g);
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
      throw Error(fmt::format("SGD: nesterov needs momentum > 0 and dampening 0, got momentum {} dampening {}{}",
                              o.momentum, o.dampening, num_groups() > 1 ? fmt::format(" (parameter group {})", g) : ""));
  }
}

SGDOptions SGD::group_options(size_t g) const {
  SGDOptions o = options_;
  o.lr = group_lr(g);
  o.weight_decay = group_setting(g, "weight_decay", o.weight_decay);
  o.dampening = group_setting(g, "dampening", o.dampening);
  return o;
}

std::shared_ptr<Optimizer> SGD::make_like(std::vector<ParamGroup> groups) const {
  SGDOptions options = options_;
  options.lr = lr();
  return std::make_shared<SGD>(std::move(groups), options);
}

void SGD::update() {
  NoGradGuard no_grad;
  // A parameter's first update seeds its buffer with the grad, so those go in a call of their own,
  // as does each parameter group.
  struct Batch {
    std::vector<Tensor> params, grads, buffers;
  };
  std::map<std::pair<size_t, bool>, Batch> batches;  // by (group, first update)
  const bool momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i];
    if (!p.grad().defined()) continue;
    Batch& b = batches[{group_of(i), momentum && !has_state(i)}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    if (momentum) b.buffers.push_back(state_for(i)[0]);
  }
  for (const auto& [key, b] : batches) {
    const SGDOptions o = group_options(key.first);
    const nograd::SgdConfig config{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov};
    nograd::sgd_step_(b.params, b.grads, b.buffers, config, key.second);
  }
}

}  // namespace accel::optim
