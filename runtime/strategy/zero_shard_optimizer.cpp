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
    : user_(user), units_(std::move(units)), shards_(std::move(shards)) {
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
  cut_segments();
  build_shard_optimizer();
}

void ShardOptimizer::cut_segments() {
  std::unordered_map<const TensorImpl*, size_t> user_index;
  for (size_t i = 0; i < user_.params().size(); ++i) user_index[user_.params()[i].impl()] = i;
  NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    const FlatUnit& unit = *units_[u];
    const int64_t lo = unit.shard_offset(), hi = lo + unit.shard_numel();
    const size_t first = segments_.size();
    for (size_t j = 0; j < unit.params().size(); ++j) {
      const int64_t begin = std::max(lo, unit.offset_of(j));
      const int64_t end = std::min(hi, unit.offset_of(j) + unit.params()[j].numel());
      const size_t group = user_.group_of(user_index.at(unit.params()[j].impl()));
      if (begin >= end) continue;
      if (segments_.size() > first && segments_.back().group == group)
        segments_.back().length = end - lo - segments_.back().start;
      else
        segments_.push_back({u, begin - lo, end - begin, group, Tensor()});
    }
    // The padding after the last parameter goes with the segment before it (its grad stays zero, so
    // no update moves it); a shard of padding alone takes the unit's last parameter's group.
    const size_t last_group = user_.group_of(user_index.at(unit.params().back().impl()));
    if (segments_.size() == first) segments_.push_back({u, 0, 0, last_group, Tensor()});
    segments_.back().length = unit.shard_numel() - segments_.back().start;
    for (size_t k = first; k < segments_.size(); ++k) {
      Segment& seg = segments_[k];
      seg.tensor = nograd::narrow(shards_[u], 0, seg.start, seg.length);
      seg.tensor.requires_grad_();
    }
  }
}

void ShardOptimizer::build_shard_optimizer() {
  std::vector<optim::ParamGroup> groups;
  segment_of_param_.clear();
  for (size_t g = 0; g < user_.num_groups(); ++g) {
    optim::ParamGroup group{{}, user_.group_settings(g)};
    if (group.settings.count("lr")) group.settings["lr"] = user_.group_lr(g);  // its lr now, in the same ratio
    for (size_t k = 0; k < segments_.size(); ++k)
      if (segments_[k].group == g) group.params.push_back(segments_[k].tensor), segment_of_param_.push_back(k);
    if (!group.params.empty()) groups.push_back(std::move(group));  // a group may lie on other ranks only
  }
  shard_optimizer_ = user_.make_like(std::move(groups));
}

int64_t ShardOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, t] : shard_optimizer_->state_dict())
    if (key != "lr") bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

void ShardOptimizer::step() {
  NoGradGuard no_grad;
  for (const Segment& seg : segments_) {
    const Tensor& grad = shards_[seg.unit].grad();
    seg.tensor.set_grad(grad.defined() ? nograd::narrow(grad, 0, seg.start, seg.length) : Tensor());
  }
  shard_optimizer_->set_lr(user_.lr());
  shard_optimizer_->apply_update();
  // The segments' grads are views lent for this update only: a shard grad the strategy drops after
  // the step (the f32 grad of a sharded master) is then freed.
  for (const Segment& seg : segments_) seg.tensor.set_grad(Tensor());
}

std::map<size_t, std::vector<std::pair<std::string, Tensor>>> ShardOptimizer::unit_shard_state() const {
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> out;
  for (const auto& [i, slots] : by_index(shard_optimizer_->state_dict())) {
    const Segment& seg = segments_[segment_of_param_[i]];
    auto& unit_slots = out[seg.unit];
    for (const auto& [slot, t] : slots) {
      auto found = std::find_if(unit_slots.begin(), unit_slots.end(), [&](const auto& e) { return e.first == slot; });
      if (found == unit_slots.end()) {
        const int64_t n = units_[seg.unit]->shard_numel();
        unit_slots.emplace_back(slot, t.dim() == 0 ? nograd::clone(t) : zeros({n}, t.dtype(), t.device()));
        found = unit_slots.end() - 1;
      }
      if (t.dim() != 0) nograd::copy_(nograd::narrow(found->second, 0, seg.start, seg.length), t);
    }
  }
  return out;
}

optim::StateDict ShardOptimizer::full_state_dict(Communicator& comm) const {
  NoGradGuard no_grad;
  const auto shard_state = unit_shard_state();
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
  for (const auto& [key, t] : user_.state_dict())  // the groups' settings and memberships, from the user's
    if (key.rfind("param_group", 0) == 0) out.emplace_back(key, t);
  return out;
}

std::map<size_t, std::vector<std::pair<std::string, Tensor>>> ShardOptimizer::segment_state() const {
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> out;
  for (auto& [i, slots] : by_index(shard_optimizer_->state_dict())) out[segment_of_param_[i]] = std::move(slots);
  return out;
}

size_t ShardOptimizer::segment_holding(size_t u, const FlatUnit::HeldRun& run,
                                       const std::map<size_t, std::vector<std::pair<std::string, Tensor>>>& state) const {
  bool unit_has_state = false;
  for (size_t k = 0; k < segments_.size(); ++k) {
    const Segment& seg = segments_[k];
    if (seg.unit != u || !state.count(k)) continue;
    unit_has_state = true;
    if (run.numel == 0 || (seg.start <= run.shard_offset && run.shard_offset + run.numel <= seg.start + seg.length))
      return k;
  }
  if (unit_has_state)  // a parameter lies in one group, so its run in one segment
    throw Error(fmt::format("ShardOptimizer: no segment of unit '{}' holds elements {} to {} of its slice", units_[u]->name(),
                            run.shard_offset, run.shard_offset + run.numel));
  return segments_.size();
}

StateShard ShardOptimizer::state_shard() const {
  NoGradGuard no_grad;
  const auto state = segment_state();
  StateShard out;
  auto add = [&out](std::string key, Tensor t, ShardPlace place) {
    out.local.emplace_back(std::move(key), std::move(t));
    out.places.push_back(std::move(place));
  };
  add("lr", scalar_tensor(user_.lr(), DType::f64), {});
  for (size_t i = 0; i < places_.size(); ++i) {
    const FlatUnit& unit = *units_[places_[i].unit];
    const FlatUnit::HeldRun run = unit.held_run(places_[i].index);
    const size_t k = segment_holding(places_[i].unit, run, state);
    if (k == segments_.size()) continue;  // no state yet
    const Segment& seg = segments_[k];
    for (const auto& [slot, t] : state.at(k)) {
      const std::string key = fmt::format("state.{}.{}", i, slot);
      if (t.dim() == 0) {  // a count (Adam's step): the same for every segment of the unit
        add(key, t, {});
        continue;
      }
      if (t.numel() != seg.length)
        throw Error(fmt::format("ShardOptimizer: the state '{}' of a segment of {} elements has {}; a sharded "
                                "optimizer's slots must be counts or per element",
                                slot, seg.length, t.numel()));
      const Tensor piece = run.numel == 0 ? empty({0}, t.dtype(), t.device())
                                          : nograd::narrow(t, 0, run.shard_offset - seg.start, run.numel);
      add(key, piece, ElementRun{run.param_offset, unit.params()[places_[i].index].shape()});
    }
  }
  for (const auto& [key, t] : user_.state_dict())  // the groups' settings and memberships, from the user's
    if (key.rfind("param_group", 0) == 0) add(key, t, {});
  return out;
}

void ShardOptimizer::load_full_state_dict(const optim::StateDict& state) { load_state(DictStateReader(state)); }

void ShardOptimizer::load_state(const StateReader& state) {
  NoGradGuard no_grad;
  // Per unit and slot: this rank's slice of it, filled from the run of each parameter that the slice
  // holds (a count taken once).
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> slices;
  for (size_t e = 0; e < state.entries().size(); ++e) {
    const StateEntry& entry = state.entries()[e];
    size_t i = 0;
    std::string slot;
    if (!optim::parse_state_key(entry.name, i, slot)) continue;
    if (i >= places_.size())
      throw Error(fmt::format("load_state_dict: the state has 'state.{}.*' but the optimizer has {} parameters", i,
                              places_.size()));
    const FlatUnit& unit = *units_[places_[i].unit];
    auto& unit_slots = slices[places_[i].unit];
    auto found = std::find_if(unit_slots.begin(), unit_slots.end(), [&](const auto& s) { return s.first == slot; });
    if (found == unit_slots.end()) {
      const Tensor fresh = entry.shape.empty() ? nograd::clone(state.read_whole(e))
                                               : zeros({unit.shard_numel()}, entry.dtype, unit.device());
      unit_slots.emplace_back(slot, fresh);
      found = unit_slots.end() - 1;
    }
    if (entry.shape.empty()) continue;
    const Shape& param_shape = unit.params()[places_[i].index].shape();
    if (entry.shape != param_shape)
      throw Error(fmt::format("load_state_dict: 'state.{}.{}' has shape {}, the parameter {}", i, slot,
                              shape_str(entry.shape), shape_str(param_shape)));
    const FlatUnit::HeldRun run = unit.held_run(places_[i].index);
    if (run.numel > 0)
      nograd::copy_(nograd::narrow(found->second, 0, run.shard_offset, run.numel),
                    state.read(e, run.param_offset, run.numel));
  }
  // The lr and the groups' settings go to the user's optimizer (which checks the memberships), and a
  // shard optimizer at those settings takes each segment's part of the state.
  optim::StateDict user_state;
  bool has_lr = false;
  for (size_t e = 0; e < state.entries().size(); ++e) {
    const std::string& key = state.entries()[e].name;
    if (key == "lr" || key.rfind("param_group", 0) == 0) user_state.emplace_back(key, state.read_whole(e)), has_lr |= key == "lr";
  }
  if (!has_lr) user_state.emplace_back("lr", scalar_tensor(user_.lr(), DType::f64));
  user_.load_state_dict(user_state);
  build_shard_optimizer();
  optim::StateDict shard_state;
  for (const auto& [key, t] : shard_optimizer_->state_dict())
    if (key == "lr" || key.rfind("param_group", 0) == 0) shard_state.emplace_back(key, t);
  for (size_t i = 0; i < segment_of_param_.size(); ++i) {
    const Segment& seg = segments_[segment_of_param_[i]];
    const auto it = slices.find(seg.unit);
    if (it == slices.end()) continue;
    for (const auto& [slot, t] : it->second)
      shard_state.emplace_back(
          fmt::format("state.{}.{}", i, slot),
          t.dim() == 0 ? t : nograd::narrow(t, 0, seg.start, seg.length));  // load_state_dict copies
  }
  shard_optimizer_->load_state_dict(shard_state);
}

}  // namespace accel
