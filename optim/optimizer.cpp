// optim::Optimizer: parameter checks, lazily created state, and its (de)serialisation.
#include "optim/optimizer.h"

#include <fmt/format.h>

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
    : params_(std::move(params)), slots_(std::move(slots)), state_(params_.size()) {
  if (params_.empty()) throw Error("Optimizer: got an empty parameter list");
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined() || !p.requires_grad() || !p.is_leaf())
      throw Error(fmt::format("Optimizer: parameter {} must be a leaf that requires grad, got {}", i,
                              p.defined() ? p.str() : "an undefined tensor"));
    if (!seen.insert(p.impl()).second) throw Error(fmt::format("Optimizer: parameter {} appears twice", i));
  }
  set_lr(lr);
}

std::shared_ptr<Optimizer> Optimizer::make_like(std::vector<Tensor>) const {
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
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<std::string> missing, unexpected, mis_shaped;
  std::unordered_set<std::string> keys;
  const Tensor* lr = nullptr;
  std::map<size_t, std::vector<const Tensor*>> found;  // param index -> one entry per slot
  for (const auto& [key, t] : state) {
    if (!t.defined()) throw Error(fmt::format("load_state_dict: '{}' is an undefined tensor", key));
    if (!keys.insert(key).second) throw Error(fmt::format("load_state_dict: key '{}' appears twice", key));
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

  if (!missing.empty() || !unexpected.empty() || !mis_shaped.empty()) {
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(fmt::format("missing keys [{}]", join(missing)));
    if (!unexpected.empty()) parts.push_back(fmt::format("unexpected keys [{}]", join(unexpected)));
    if (!mis_shaped.empty()) parts.push_back(fmt::format("mis-shaped keys [{}]", join(mis_shaped)));
    throw Error(fmt::format("load_state_dict: the state does not fit this {}: {}", type_name(), join(parts, "; ")));
  }

  NoGradGuard no_grad;
  set_lr(lr->item());
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
