// optim::Optimizer: the base of SGD and AdamW. It holds the parameters, the learning rate and each
// parameter's named state, which it saves and loads as a flat list of (name, tensor).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace accel::optim {

// An ordered list of (name, tensor); the same type as nn::StateDict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// Splits a state_dict key "state.<i>.<slot>" into i and slot; false for any other key ("lr").
bool parse_state_key(const std::string& key, size_t& index, std::string& slot);

class Optimizer;

// What an optimizer's step() and zero_grad() do when a runtime has taken them over.
class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void step(Optimizer& optimizer) = 0;
  virtual void zero_grad(Optimizer& optimizer, bool set_to_none) = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type_name() const = 0;
  // An optimizer of the same kind and settings (its current lr included) over other parameters, with
  // fresh state: a sharded strategy runs the user's optimizer this way over its flat shards. The
  // base throws, naming the type; SGD and AdamW implement it.
  virtual std::shared_ptr<Optimizer> make_like(std::vector<Tensor> params) const;
  // Updates every parameter that has a grad; parameters without one are left alone, state and all.
  // With a step hook installed (below), the hook decides what a step is.
  void step();

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  // Drops every parameter's grad (set_to_none) or zeroes it in place; with a step hook, the hook
  // decides.
  void zero_grad(bool set_to_none = true);

  // Installs the hook that step() and zero_grad() hand over to. The Accelerator installs one on the
  // optimizers it prepares, so that the object the user calls step() on waits for the end of an
  // accumulation window, skips overflowed fp16 steps and lets a sharded strategy update its shards,
  // without wrapping the optimizer in another type. Held weakly: an optimizer that outlives its hook
  // steps plainly again. An empty pointer removes it.
  void set_step_hook(std::weak_ptr<StepHook> hook) { step_hook_ = std::move(hook); }
  // The update itself and the plain zero_grad, whatever hook is installed: for the hook to call.
  void apply_update() { update(); }
  void clear_grads(bool set_to_none);

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

  // The update itself: step() runs it, or a step hook through apply_update().
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
  std::weak_ptr<StepHook> step_hook_;
};

}  // namespace accel::optim
