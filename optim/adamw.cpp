// optim::AdamW: advances each updated parameter's step count and calls the fused update once per
// distinct count (once in all in the usual case where every parameter gets a grad every step).
#include "optim/adamw.h"

#include <fmt/format.h>

#include <map>

#include "autograd/grad_mode.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/optim_ops.h"

namespace accel::optim {

namespace {
constexpr size_t kStep = 0, kExpAvg = 1, kExpAvgSq = 2;
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Optimizer(std::move(params), options.lr, {{"step", true}, {"exp_avg", false}, {"exp_avg_sq", false}}),
      options_(options) {
  if (!(options.beta1 >= 0.0 && options.beta1 < 1.0 && options.beta2 >= 0.0 && options.beta2 < 1.0))
    throw Error(fmt::format("AdamW: betas must be in [0, 1), got ({}, {})", options.beta1, options.beta2));
  if (!(options.eps >= 0.0) || !(options.weight_decay >= 0.0))
    throw Error(fmt::format("AdamW: eps {} and weight_decay {} must be >= 0", options.eps, options.weight_decay));
}

std::shared_ptr<Optimizer> AdamW::make_like(std::vector<Tensor> params) const {
  AdamWOptions options = options_;
  options.lr = lr();
  return std::make_shared<AdamW>(std::move(params), options);
}

void AdamW::update() {
  NoGradGuard no_grad;
  const nograd::AdamWConfig config{lr(), options_.beta1, options_.beta2, options_.eps, options_.weight_decay};
  struct Group {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs;
  };
  std::map<int64_t, Group> groups;  // by step count, which sets the bias correction
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i];
    if (!p.grad().defined()) continue;
    const std::vector<Tensor>& state = state_for(i);
    const int64_t step = static_cast<int64_t>(state[kStep].item()) + 1;
    nograd::fill_(state[kStep], static_cast<double>(step));
    Group& g = groups[step];
    g.params.push_back(p);
    g.grads.push_back(p.grad());
    g.exp_avgs.push_back(state[kExpAvg]);
    g.exp_avg_sqs.push_back(state[kExpAvgSq]);
  }
  for (const auto& [step, g] : groups) nograd::adamw_step_(g.params, g.grads, g.exp_avgs, g.exp_avg_sqs, config, step);
}

}  // namespace accel::optim
