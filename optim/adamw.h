// optim::AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), PyTorch's update rule.
#pragma once

#include "optim/optimizer.h"

namespace accel::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// With t the parameter's own step count: p -= lr * weight_decay * p; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// State: "step", "exp_avg", "exp_avg_sq".
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options);
  // Groups may set lr, weight_decay, beta1, beta2 and eps; options gives the rest.
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options);

  std::string type_name() const override { return "AdamW"; }
  std::shared_ptr<Optimizer> make_like(std::vector<ParamGroup> groups) const override;
  const AdamWOptions& options() const { return options_; }

 protected:
  void update() override;

 private:
  static std::vector<Slot> adam_slots();
  void check_options() const;
  // Group g's options: its settings over options_, at its lr.
  AdamWOptions group_options(size_t g) const;

  AdamWOptions options_;
};

}  // namespace accel::optim
