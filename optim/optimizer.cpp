// optim::Optimizer: parameter checks, lazily created state, and its (de)serialisation.
#include "optim/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel::optim {

namespace {

// "param_groups.<g>.<setting>" and "param_group.<i>"; the second is a prefix of the first.
constexpr const char* kGroupsPrefix = "param_groups.";
constexpr const char* kMemberPrefix = "param_group.";
constexpr const char* kAnyGroupKey = "param_group";  // what both begin with

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}


}  // namespace

bool parse_state_key(const std::string& key, size_t& index, std::string& slot) {
  const std::string prefix = "state.";
  if (key.rfind(prefix, 0) != 0) return false;
  const char* first = key.data() + prefix.size();
  const char* last = key.data() + key.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end == first || end == last || *end != '.') return false;
  slot.assign(end + 1, last);
  return !slot.empty();
}

Optimizer::Optimizer(std::vector<Tensor> params, double lr, std::vector<Slot> slots)
    : params_(std::move(params)), groups_(1), group_of_(params_.size(), 0), slots_(std::move(slots)),
      state_(params_.size()) {
  if (params_.empty()) throw Error("Optimizer: got an empty parameter list");
  check_params();
  set_lr(lr);
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, std::vector<Slot> slots,
                     std::vector<std::string> setting_names)
    : slots_(std::move(slots)) {
  if (groups.empty()) throw Error("Optimizer: got no parameter groups");
  set_lr(lr);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].params.empty()) throw Error(fmt::format("Optimizer: parameter group {} is empty", g));
    for (const Tensor& p : groups[g].params) params_.push_back(p), group_of_.push_back(g);
    groups_.push_back({std::move(groups[g].settings), 1.0});
  }
  state_.resize(params_.size());
  check_params();
  setting_names.push_back("lr");
  check_groups(setting_names);
  for (Group& group : groups_) {
    const auto it = group.settings.find("lr");
    if (it == group.settings.end()) continue;
    if (lr == 0.0 && it->second != 0.0)
      throw Error(fmt::format("Optimizer: a parameter group's lr {} needs the optimizer's lr > 0, which it keeps its "
                              "ratio to; got lr 0",
                              it->second));
    group.lr_ratio = lr == 0.0 ? 1.0 : it->second / lr;
  }
}

void Optimizer::check_params() const {
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined() || !p.requires_grad() || !p.is_leaf())
      throw Error(fmt::format("Optimizer: parameter {} must be a leaf that requires grad, got {}", i,
                              p.defined() ? p.str() : "an undefined tensor"));
    if (!seen.insert(p.impl()).second)
      throw Error(groups_.size() > 1 ? fmt::format("Optimizer: parameter {} appears twice (in group {})", i, group_of_[i])
                                     : fmt::format("Optimizer: parameter {} appears twice", i));
  }
}

void Optimizer::check_groups(const std::vector<std::string>& setting_names) const {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& [name, value] : groups_[g].settings) {
      if (std::find(setting_names.begin(), setting_names.end(), name) == setting_names.end())
        throw Error(fmt::format("Optimizer: parameter group {} sets '{}', which this optimizer does not have; expected "
                                "one of {}",
                                g, name, join(setting_names)));
      if (!(value >= 0.0 && std::isfinite(value)))
        throw Error(fmt::format("Optimizer: parameter group {} sets {} to {}; expected a finite value >= 0", g, name,
                                value));
    }
}

double Optimizer::group_setting(size_t g, const std::string& name, double fallback) const {
  const auto it = groups_[g].settings.find(name);
  return it == groups_[g].settings.end() ? fallback : it->second;
}

bool Optimizer::has_group_settings() const { return groups_.size() > 1 || !groups_[0].settings.empty(); }

std::shared_ptr<Optimizer> Optimizer::make_like(std::vector<ParamGroup>) const {
  throw Error(fmt::format("Optimizer::make_like: {} cannot be rebuilt over other parameters, which a sharded "
                          "strategy (ZeRO, FSDP) needs; use SGD or AdamW, or implement make_like",
                          type_name()));
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0.0 && std::isfinite(lr)))
    throw Error(fmt::format("Optimizer::set_lr: lr must be finite and >= 0, got {}", lr));
  lr_ = lr;
}

void Optimizer::step() {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].is_meta())
      throw Error(fmt::format("{}::step: parameter {} ({} {}) is not materialised: its model was built under "
                              "accel::DeferredInit (init_empty_weights); prepare the model and this optimizer with "
                              "an Accelerator (or call nn::materialize on the model) before stepping",
                              type_name(), i, dtype_name(params_[i].dtype()), shape_str(params_[i].shape())));
  if (auto hook = step_hook_.lock()) hook->step(*this);
  else update();
}

void Optimizer::zero_grad(bool set_to_none) {
  if (auto hook = step_hook_.lock()) hook->zero_grad(*this, set_to_none);
  else clear_grads(set_to_none);
}

void Optimizer::clear_grads(bool set_to_none) {
  for (const Tensor& p : params_) {
    if (set_to_none) p.set_grad(Tensor());
    else if (p.grad().defined()) nograd::zero_(p.grad());
  }
}

DType Optimizer::state_dtype(const Tensor& param) const {
  return param.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

Tensor Optimizer::new_state(const Slot& slot, const Tensor& param) const {
  if (slot.is_count) return scalar_tensor(0.0, DType::i64);
  return zeros(param.shape(), state_dtype(param), param.device());
}

const std::vector<Tensor>& Optimizer::state_for(size_t i) {
  const Tensor& param = params_[i];
  std::vector<Tensor>& state = state_[i];
  if (state.empty()) {
    for (const Slot& slot : slots_) state.push_back(new_state(slot, param));
    return state;
  }
  NoGradGuard no_grad;
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (slots_[k].is_count) continue;
    const DType dtype = state_dtype(param);
    if (state[k].device() != param.device() || state[k].dtype() != dtype)
      state[k].set_data(nograd::to_device(nograd::to_dtype(state[k], dtype), param.device()));
  }
  return state;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out.emplace_back("lr", scalar_tensor(lr_, DType::f64));
  for (size_t i = 0; i < params_.size(); ++i)
    for (size_t k = 0; k < state_[i].size(); ++k)
      out.emplace_back(fmt::format("state.{}.{}", i, slots_[k].name), state_[i][k]);
  if (!has_group_settings()) return out;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& [name, value] : groups_[g].settings)
      out.emplace_back(fmt::format("{}{}.{}", kGroupsPrefix, g, name),
                       scalar_tensor(name == "lr" ? group_lr(g) : value, DType::f64));
  for (size_t i = 0; i < params_.size(); ++i)
    out.emplace_back(fmt::format("{}{}", kMemberPrefix, i), scalar_tensor(static_cast<double>(group_of_[i]), DType::i64));
  return out;
}

void Optimizer::read_group_keys(const StateDict& state, std::vector<std::map<std::string, double>>& settings,
                                std::vector<std::string>& problems) const {
  settings.assign(groups_.size(), {});
  std::vector<bool> member_seen(params_.size(), false);
  for (const auto& [key, t] : state) {
    if (key.rfind(kAnyGroupKey, 0) != 0) continue;
    size_t index = 0;
    std::string name;
    if (key.rfind(kGroupsPrefix, 0) == 0) {
      const std::string rest = key.substr(std::string(kGroupsPrefix).size());
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
      const bool parsed = ec == std::errc() && end != rest.data() && *end == '.';
      name = parsed ? std::string(end + 1, rest.data() + rest.size()) : "";
      if (!parsed || index >= groups_.size() || !groups_[index].settings.count(name) || t.dim() != 0)
        problems.push_back(fmt::format("unexpected key '{}'", key));
      else
        settings[index][name] = t.item();
    } else if (key.rfind(kMemberPrefix, 0) == 0) {
      const std::string rest = key.substr(std::string(kMemberPrefix).size());
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
      if (ec != std::errc() || end != rest.data() + rest.size() || index >= params_.size() || t.dim() != 0) {
        problems.push_back(fmt::format("unexpected key '{}'", key));
        continue;
      }
      member_seen[index] = true;
      const double saved = t.item();
      if (saved != static_cast<double>(group_of_[index]))
        problems.push_back(fmt::format("parameter {} is in group {} here but in group {} in the state", index,
                                       group_of_[index], saved));
    } else {
      problems.push_back(fmt::format("unexpected key '{}'", key));
    }
  }
  if (!has_group_settings()) return;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& [name, value] : groups_[g].settings)
      if (!settings[g].count(name)) problems.push_back(fmt::format("missing key '{}{}.{}'", kGroupsPrefix, g, name));
  for (size_t i = 0; i < params_.size(); ++i)
    if (!member_seen[i]) problems.push_back(fmt::format("missing key '{}{}'", kMemberPrefix, i));
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<std::string> missing, unexpected, mis_shaped;
  std::unordered_set<std::string> keys;
  const Tensor* lr = nullptr;
  std::map<size_t, std::vector<const Tensor*>> found;  // param index -> one entry per slot
  for (const auto& [key, t] : state) {
    if (!t.defined()) throw Error(fmt::format("load_state_dict: '{}' is an undefined tensor", key));
    if (!keys.insert(key).second) throw Error(fmt::format("load_state_dict: key '{}' appears twice", key));
    if (key.rfind(kAnyGroupKey, 0) == 0) continue;  // read_group_keys reads these
    if (key == "lr") {
      if (t.dim() != 0) mis_shaped.push_back(fmt::format("lr: optimizer [], state {}", shape_str(t.shape())));
      else lr = &t;
      continue;
    }
    size_t index = 0;
    std::string name;
    size_t slot = slots_.size();
    if (parse_state_key(key, index, name) && index < params_.size())
      for (size_t k = 0; k < slots_.size(); ++k)
        if (slots_[k].name == name) slot = k;
    if (slot == slots_.size()) {
      unexpected.push_back(key);
      continue;
    }
    const Shape expected = slots_[slot].is_count ? Shape{} : params_[index].shape();
    if (t.shape() != expected) {
      mis_shaped.push_back(fmt::format("{}: optimizer {}, state {}", key, shape_str(expected), shape_str(t.shape())));
      continue;
    }
    auto& entries = found[index];
    entries.resize(slots_.size(), nullptr);
    entries[slot] = &t;
  }
  if (!lr && !keys.count("lr")) missing.push_back("lr");
  for (const auto& [index, entries] : found)
    for (size_t k = 0; k < slots_.size(); ++k)
      if (!entries[k] && !keys.count(fmt::format("state.{}.{}", index, slots_[k].name)))
        missing.push_back(fmt::format("state.{}.{}", index, slots_[k].name));

  std::vector<std::map<std::string, double>> group_settings;
  std::vector<std::string> group_problems;
  read_group_keys(state, group_settings, group_problems);

  if (!missing.empty() || !unexpected.empty() || !mis_shaped.empty() || !group_problems.empty()) {
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(fmt::format("missing keys [{}]", join(missing)));
    if (!unexpected.empty()) parts.push_back(fmt::format("unexpected keys [{}]", join(unexpected)));
    if (!mis_shaped.empty()) parts.push_back(fmt::format("mis-shaped keys [{}]", join(mis_shaped)));
    if (!group_problems.empty()) parts.push_back(fmt::format("parameter groups: {}", join(group_problems)));
    throw Error(fmt::format("load_state_dict: the state does not fit this {}: {}", type_name(), join(parts, "; ")));
  }

  NoGradGuard no_grad;
  set_lr(lr->item());
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& [name, value] : group_settings[g]) {
      groups_[g].settings[name] = value;
      if (name == "lr" && lr_ > 0.0) groups_[g].lr_ratio = value / lr_;
    }
  for (size_t i = 0; i < params_.size(); ++i) {
    state_[i].clear();
    auto it = found.find(i);
    if (it == found.end()) continue;
    for (size_t k = 0; k < slots_.size(); ++k) {
      Tensor t = new_state(slots_[k], params_[i]);
      nograd::copy_(t, *it->second[k]);
      state_[i].push_back(t);
    }
  }
}

}  // namespace accel::optim
