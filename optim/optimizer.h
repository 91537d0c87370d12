// optim::Optimizer: the base of SGD and AdamW. It holds the parameters, the learning rate and each
// parameter's named state, which it saves and loads as a flat list of (name, tensor).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace accel::optim {

// An ordered list of (name, tensor); the same type as nn::StateDict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type_name() const = 0;
  // Updates every parameter that has a grad; parameters without one are left alone, state and all.
  // Does nothing when the step gate (below) says no.
  void step();

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  // Drops every parameter's grad (set_to_none) or zeroes it in place. Does nothing when the
  // zero_grad gate says no.
  void zero_grad(bool set_to_none = true);

  // Gates that step() and zero_grad() ask before they act; an empty function always says yes. The
  // Accelerator installs them so that, during gradient accumulation, the optimizer neither updates
  // nor clears the grads before the last micro-batch of a window, without wrapping the optimizer in
  // another type.
  void set_gates(std::function<bool()> step_gate, std::function<bool()> zero_grad_gate);

  // "lr" (0-d f64), then "state.<i>.<slot>" for each parameter i that has state, in parameter order;
  // counts such as "step" are 0-d i64 tensors. The tensors are the live ones, not copies.
  StateDict state_dict() const;
  // Restores a state_dict() of an optimizer of the same kind over parameters of the same shapes.
  // Throws one Error naming every missing, unexpected and mis-shaped key, and then changes nothing.
  void load_state_dict(const StateDict& state);

 protected:
  // One kind of per-parameter state: a count (a 0-d i64 on the CPU, such as Adam's step) or a
  // tensor of the parameter's shape on its device (a moment estimate).
  struct Slot {
    std::string name;
    bool is_count = false;
  };
  Optimizer(std::vector<Tensor> params, double lr, std::vector<Slot> slots);

  // The update itself, which step() runs when its gate allows.
  virtual void update() = 0;

  // The dtype of tensor slots: f32, or f64 for f64 parameters so gradcheck-precision tests hold.
  virtual DType state_dtype(const Tensor& param) const;
  // Param i's state, one tensor per slot, zeros on first use. A parameter moved or cast since
  // (Module::to) takes its state along.
  const std::vector<Tensor>& state_for(size_t i);
  bool has_state(size_t i) const { return !state_[i].empty(); }

 private:
  Tensor new_state(const Slot& slot, const Tensor& param) const;

  std::vector<Tensor> params_;
  double lr_;
  std::vector<Slot> slots_;
  std::vector<std::vector<Tensor>> state_;  // state_[i][slot], empty until param i's first update
  std::function<bool()> step_gate_, zero_grad_gate_;
};

}  // namespace accel::optim
