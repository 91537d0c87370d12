// optim::Optimizer: the base of SGD and AdamW. It holds the parameters, the learning rate and each
// parameter's named state, which it saves and loads as a flat list of (name, tensor).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/param_group.h"
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
  // An optimizer of the same kind and settings (its current lr included) over other parameters in
  // groups of their own settings, with fresh state: a sharded strategy runs the user's optimizer this
  // way over slices of its flat shards. The base throws, naming the type; SGD and AdamW implement it.
  virtual std::shared_ptr<Optimizer> make_like(std::vector<ParamGroup> groups) const;
  // Updates every parameter that has a grad; parameters without one are left alone, state and all.
  // With a step hook installed (below), the hook decides what a step is.
  void step();

  // The optimizer's lr; a group with an lr of its own runs at group_lr(g).
  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }  // every group's, in group order

  // --- parameter groups -----------------------------------------------------------------------
  size_t num_groups() const { return groups_.size(); }
  size_t group_of(size_t param) const { return group_of_[param]; }
  // The settings group g was given (not the ones it takes from the optimizer).
  const std::map<std::string, double>& group_settings(size_t g) const { return groups_[g].settings; }
  double group_lr(size_t g) const { return lr_ * groups_[g].lr_ratio; }
  // Group g's value of an option: its own setting, else the optimizer's (fallback).
  double group_setting(size_t g, const std::string& name, double fallback) const;
  // More than one group, or a group with settings of its own: the optimizer is not uniform.
  bool has_group_settings() const;
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
  // counts such as "step" are 0-d i64 tensors. The tensors are the live ones, not copies. With groups
  // (has_group_settings), also "param_groups.<g>.<setting>" (0-d f64; "lr" is the group's lr) and
  // "param_group.<i>" (0-d i64, parameter i's group), which a checkpoint keys by parameter name.
  StateDict state_dict() const;
  // Restores a state_dict() of an optimizer of the same kind over parameters of the same shapes, and
  // the groups' settings (as PyTorch restores its param_groups' hyperparameters). Throws one Error
  // naming every missing, unexpected and mis-shaped key, or a parameter now in another group than the
  // state's, and then changes nothing.
  void load_state_dict(const StateDict& state);

 protected:
  // One kind of per-parameter state: a count (a 0-d i64 on the CPU, such as Adam's step) or a
  // tensor of the parameter's shape on its device (a moment estimate).
  struct Slot {
    std::string name;
    bool is_count = false;
  };
  Optimizer(std::vector<Tensor> params, double lr, std::vector<Slot> slots);
  // setting_names: the options a group may set ("lr" is always one). Throws accel::Error for an empty
  // group, a parameter in two groups, an unknown or negative setting, or a group lr with lr 0.
  Optimizer(std::vector<ParamGroup> groups, double lr, std::vector<Slot> slots, std::vector<std::string> setting_names);

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

  struct Group {
    std::map<std::string, double> settings;
    double lr_ratio = 1.0;  // the group's lr / the optimizer's, fixed when it is given
  };
  void check_params() const;
  void check_groups(const std::vector<std::string>& setting_names) const;
  // The group keys of a state dict checked against this optimizer's groups; their values go in
  // settings (by group) and mismatches in problems.
  void read_group_keys(const StateDict& state, std::vector<std::map<std::string, double>>& settings,
                       std::vector<std::string>& problems) const;

  std::vector<Tensor> params_;
  std::vector<Group> groups_;
  std::vector<size_t> group_of_;  // by parameter
  double lr_;
  std::vector<Slot> slots_;
  std::vector<std::vector<Tensor>> state_;  // state_[i][slot], empty until param i's first update
  std::weak_ptr<StepHook> step_hook_;
};

}  // namespace accel::optim
