// optim::AdamW: advances each updated parameter's step count and calls the fused update once per
// parameter group and distinct count (once per group in the usual case where every parameter gets a
// grad every step).
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
    : Optimizer(std::move(params), options.lr, adam_slots()), options_(options) {
  check_options();
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer(std::move(groups), options.lr, adam_slots(), {"weight_decay", "beta1", "beta2", "eps"}), options_(options) {
  check_options();
}

std::vector<Optimizer::Slot> AdamW::adam_slots() { return {{"step", true}, {"exp_avg", false}, {"exp_avg_sq", false}}; }

void AdamW::check_options() const {
  for (size_t g = 0; g < num_groups(); ++g) {
    const AdamWOptions o = group_options(g);
    const std::string where = num_groups() > 1 ? fmt::format(" (parameter group {})", g) : "";
    if (!(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0))
      throw Error(fmt::format("AdamW: betas must be in [0, 1), got ({}, {}){}", o.beta1, o.beta2, where));
    if (!(o.eps >= 0.0) || !(o.weight_decay >= 0.0))
      throw Error(fmt::format("AdamW: eps {} and weight_decay {} must be >= 0{}", o.eps, o.weight_decay, where));
  }
}

AdamWOptions AdamW::group_options(size_t g) const {
  AdamWOptions o = options_;
  o.lr = group_lr(g);
  o.weight_decay = group_setting(g, "weight_decay", o.weight_decay);
  o.beta1 = group_setting(g, "beta1", o.beta1);
  o.beta2 = group_setting(g, "beta2", o.beta2);
  o.eps = group_setting(g, "eps", o.eps);
  return o;
}

std::shared_ptr<Optimizer> AdamW::make_like(std::vector<ParamGroup> groups) const {
  AdamWOptions options = options_;
  options.lr = lr();
  return std::make_shared<AdamW>(std::move(groups), options);
}

void AdamW::update() {
  NoGradGuard no_grad;
  struct Batch {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs;
  };
  // By parameter group (its settings) and step count (which sets the bias correction).
  std::map<std::pair<size_t, int64_t>, Batch> batches;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i];
    if (!p.grad().defined()) continue;
    const std::vector<Tensor>& state = state_for(i);
    const int64_t step = static_cast<int64_t>(state[kStep].item()) + 1;
    nograd::fill_(state[kStep], static_cast<double>(step));
    Batch& b = batches[{group_of(i), step}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    b.exp_avgs.push_back(state[kExpAvg]);
    b.exp_avg_sqs.push_back(state[kExpAvgSq]);
  }
  for (const auto& [key, b] : batches) {
    const AdamWOptions o = group_options(key.first);
    const nograd::AdamWConfig config{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
    nograd::adamw_step_(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, config, key.second);
  }
}

}  // namespace accel::optim
