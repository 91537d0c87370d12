// ShardOptimizer: where each user parameter lies, the shard update, and the state moved between the
// user's layout (full tensors per parameter) and the shards' (one flat slice per unit).
#include "runtime/strategy/zero_shard_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {


// The "state.<i>.<slot>" entries of a state dict, by i, each in the order they came.
std::map<size_t, std::vector<std::pair<std::string, Tensor>>> by_index(const optim::StateDict& state) {
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> out;
  for (const auto& [key, t] : state) {
    size_t i = 0;
    std::string slot;
    if (optim::parse_state_key(key, i, slot)) out[i].emplace_back(slot, t);
  }
  return out;
}

}  // namespace

ShardOptimizer::ShardOptimizer(optim::Optimizer& user, std::vector<const FlatUnit*> units, std::vector<Tensor> shards,
                               const std::string& strategy)
    : user_(user), units_(std::move(units)) {
  if (user.has_group_settings())
    throw Error(fmt::format("Accelerator::prepare: {} updates flat shards that mix the parameters of a unit, so it "
                            "takes an optimizer without parameter groups; got {} with {} group(s) of their own "
                            "settings",
                            strategy, user.type_name(), user.num_groups()));
  std::unordered_map<const TensorImpl*, Place> where;
  for (size_t u = 0; u < units_.size(); ++u)
    for (size_t j = 0; j < units_[u]->params().size(); ++j) where[units_[u]->params()[j].impl()] = {u, j};
  std::vector<size_t> covered(units_.size(), 0);
  for (size_t i = 0; i < user.params().size(); ++i) {
    const auto it = where.find(user.params()[i].impl());
    if (it == where.end())
      throw Error(fmt::format("Accelerator::prepare: the optimizer's parameter {} ({}) is in no model prepared under "
                              "{}; prepare its model first",
                              i, user.params()[i].str(), strategy));
    places_.push_back(it->second);
    ++covered[it->second.unit];
  }
  for (size_t u = 0; u < units_.size(); ++u)
    if (covered[u] != units_[u]->params().size())
      throw Error(fmt::format("Accelerator::prepare: the optimizer holds {} of the {} parameters of {} unit '{}'; "
                              "a unit's parameters are updated together, so one optimizer must hold all of them",
                              covered[u], units_[u]->params().size(), strategy, units_[u]->name()));
  shard_optimizer_ = user.make_like(std::move(shards));
}

int64_t ShardOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, t] : shard_optimizer_->state_dict())
    if (key != "lr") bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

void ShardOptimizer::step() {
  shard_optimizer_->set_lr(user_.lr());
  shard_optimizer_->apply_update();
}

optim::StateDict ShardOptimizer::full_state_dict(Communicator& comm) const {
  NoGradGuard no_grad;
  const auto shard_state = by_index(shard_optimizer_->state_dict());
  // Each unit's slots gathered to full flat tensors, in unit order on every rank.
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> gathered;
  for (const auto& [u, slots] : shard_state) {
    for (const auto& [slot, t] : slots) {
      if (t.dim() == 0) {  // a count (Adam's step): the same on every rank
        gathered[u].emplace_back(slot, nograd::clone(t));
        continue;
      }
      Tensor full = empty({units_[u]->padded_numel()}, t.dtype(), t.device());
      comm.all_gather(nograd::contiguous(t), full);
      gathered[u].emplace_back(slot, full);
    }
  }
  optim::StateDict out;
  out.emplace_back("lr", scalar_tensor(user_.lr(), DType::f64));
  for (size_t i = 0; i < places_.size(); ++i) {
    const auto it = gathered.find(places_[i].unit);
    if (it == gathered.end()) continue;  // no state yet
    const FlatUnit& unit = *units_[places_[i].unit];
    for (const auto& [slot, t] : it->second) {
      const Tensor value = t.dim() == 0 ? t : nograd::clone(unit.param_view(t, places_[i].index));
      out.emplace_back(fmt::format("state.{}.{}", i, slot), value);
    }
  }
  return out;
}

void ShardOptimizer::load_full_state_dict(const optim::StateDict& state) {
  NoGradGuard no_grad;
  const auto per_param = by_index(state);
  // Per unit and slot: the flat tensor assembled from its parameters' entries (a count taken once).
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> flat;
  for (const auto& [i, slots] : per_param) {
    if (i >= places_.size())
      throw Error(fmt::format("load_state_dict: the state has 'state.{}.*' but the optimizer has {} parameters", i,
                              places_.size()));
    const FlatUnit& unit = *units_[places_[i].unit];
    auto& unit_slots = flat[places_[i].unit];
    for (const auto& [slot, t] : slots) {
      auto found = std::find_if(unit_slots.begin(), unit_slots.end(), [&](const auto& e) { return e.first == slot; });
      if (found == unit_slots.end()) {
        const Tensor fresh = t.dim() == 0 ? nograd::clone(t) : zeros({unit.padded_numel()}, t.dtype(), unit.device());
        unit_slots.emplace_back(slot, fresh);
        found = unit_slots.end() - 1;
      }
      if (t.dim() == 0) continue;
      const Tensor view = unit.param_view(found->second, places_[i].index);
      if (view.shape() != t.shape())
        throw Error(fmt::format("load_state_dict: 'state.{}.{}' has shape {}, the parameter {}", i, slot,
                                shape_str(t.shape()), shape_str(view.shape())));
      nograd::copy_(view, t);
    }
  }
  optim::StateDict shard_state;
  double lr = user_.lr();
  for (const auto& [key, t] : state)
    if (key == "lr") lr = t.item();
  shard_state.emplace_back("lr", scalar_tensor(lr, DType::f64));
  for (const auto& [u, slots] : flat)
    for (const auto& [slot, t] : slots)
      shard_state.emplace_back(fmt::format("state.{}.{}", u, slot),
                               t.dim() == 0 ? t : nograd::clone(units_[u]->shard_of(t)));
  shard_optimizer_->load_state_dict(shard_state);
  user_.set_lr(lr);
}

}  // namespace accel
