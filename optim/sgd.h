// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay,
// with PyTorch's update rule.
#pragma once

#include "optim/optimizer.h"

namespace accel::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: added to the grad
  bool nesterov = false;      // needs momentum > 0 and dampening 0
};

// g = grad + weight_decay * p; b = g on a parameter's first update, else momentum * b + (1 - dampening) * g;
// p -= lr * (nesterov ? g + momentum * b : b) (plain g when momentum is 0). State: "momentum_buffer".
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  // Groups may set lr, weight_decay and dampening; momentum and nesterov are the optimizer's, since
  // they decide which state every parameter keeps.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);

  std::string type_name() const override { return "SGD"; }
  std::shared_ptr<Optimizer> make_like(std::vector<ParamGroup> groups) const override;
  const SGDOptions& options() const { return options_; }

 protected:
  void update() override;

 private:
  static std::vector<Slot> sgd_slots(const SGDOptions& options);
  void check_options() const;
  SGDOptions group_options(size_t g) const;

  SGDOptions options_;
};

}  // namespace accel::optim
