// optim::SGD: groups parameters by whether their momentum buffer exists, then calls the fused update.
#include "optim/sgd.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "tensor/nograd/optim_ops.h"

namespace accel::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr,
                options.momentum != 0.0 ? std::vector<Slot>{{"momentum_buffer", false}} : std::vector<Slot>{}),
      options_(options) {
  if (options.momentum < 0.0 || options.weight_decay < 0.0)
    throw Error(fmt::format("SGD: momentum {} and weight_decay {} must be >= 0", options.momentum,
                            options.weight_decay));
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0))
    throw Error(fmt::format("SGD: nesterov needs momentum > 0 and dampening 0, got momentum {} dampening {}",
                            options.momentum, options.dampening));
}

std::shared_ptr<Optimizer> SGD::make_like(std::vector<Tensor> params) const {
  SGDOptions options = options_;
  options.lr = lr();
  return std::make_shared<SGD>(std::move(params), options);
}

void SGD::update() {
  NoGradGuard no_grad;
  const nograd::SgdConfig config{lr(), options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  // A parameter's first update seeds its buffer with the grad, so those go in a call of their own.
  struct Group {
    std::vector<Tensor> params, grads, buffers;
  };
  Group later, first;
  const bool momentum = options_.momentum != 0.0;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i];
    if (!p.grad().defined()) continue;
    Group& g = momentum && !has_state(i) ? first : later;
    g.params.push_back(p);
    g.grads.push_back(p.grad());
    if (momentum) g.buffers.push_back(state_for(i)[0]);
  }
  if (!later.params.empty()) nograd::sgd_step_(later.params, later.grads, later.buffers, config, false);
  if (!first.params.empty()) nograd::sgd_step_(first.params, first.grads, first.buffers, config, true);
}

}  // namespace accel::optim
