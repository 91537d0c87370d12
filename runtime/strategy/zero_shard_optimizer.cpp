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
  std::unordered_map<const TensorImpl*, size_t> unit_of;
  for (size_t u = 0; u < units_.size(); ++u)
    for (const Tensor& p : units_[u]->params()) unit_of[p.impl()] = u;
  std::vector<size_t> covered(units_.size(), 0);
  for (size_t i = 0; i < user.params().size(); ++i) {
    const auto it = unit_of.find(user.params()[i].impl());
    if (it == unit_of.end())
      throw Error(fmt::format("Accelerator::prepare: the optimizer's parameter {} ({}) is in no model prepared under "
                              "{}; prepare its model first",
                              i, user.params()[i].str(), strategy));
    ++covered[it->second];
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
  segment_of_user_.assign(user_.params().size(), 0);
  NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    const FlatUnit& unit = *units_[u];
    const int64_t lo = unit.shard_offset(), size = unit.shard_numel();
    for (size_t j = 0; j < unit.params().size(); ++j) {
      const FlatUnit::HeldRun run = unit.held_run(j);
      // An empty run sits where the parameter would start, clamped to the slice.
      const int64_t start = run.numel > 0 ? run.shard_offset : std::clamp(unit.offset_of(j) - lo, int64_t{0}, size);
      const size_t i = user_index.at(unit.params()[j].impl());
      segment_of_user_[i] = segments_.size();
      segments_.push_back({u, j, start, run.numel, user_.group_of(i), Tensor()});
    }
    // The padding after the last parameter goes with its segment: its grad stays zero, so no update
    // moves it.
    if (unit.numel() - lo < size) segments_.back().length = size - segments_.back().start;
  }
  for (Segment& seg : segments_) {
    seg.tensor = nograd::narrow(shards_[seg.unit], 0, seg.start, seg.length);
    seg.tensor.requires_grad_();
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

void ShardOptimizer::step(const std::vector<std::vector<bool>>& has_grad) {
  NoGradGuard no_grad;
  for (const Segment& seg : segments_) {
    const Tensor& grad = shards_[seg.unit].grad();
    const bool update = grad.defined() && has_grad.at(seg.unit).at(seg.param);
    seg.tensor.set_grad(update ? nograd::narrow(grad, 0, seg.start, seg.length) : Tensor());
  }
  shard_optimizer_->set_lr(user_.lr());
  shard_optimizer_->apply_update();
  // The segments' grads are views lent for this update only: a shard grad the strategy drops after
  // the step (the f32 grad of a sharded master) is then freed.
  for (const Segment& seg : segments_) seg.tensor.set_grad(Tensor());
}

optim::StateDict ShardOptimizer::full_state_dict(Communicator& comm) const {
  NoGradGuard no_grad;
  const auto state = segment_state();
  // Per unit and element slot: this rank's slice of it, from its segments' state (zeros where a
  // segment has none), gathered to a full flat tensor in unit and slot-name order. Every rank holds
  // state for the same segments, so every rank gathers the same slots.
  std::map<size_t, std::map<std::string, Tensor>> gathered;
  for (const auto& [k, slots] : state) {
    const Segment& seg = segments_[k];
    for (const auto& [slot, t] : slots) {
      if (t.dim() == 0) continue;  // a count (Adam's step): the parameter's own, below
      Tensor& slice = gathered[seg.unit][slot];
      if (!slice.defined()) slice = zeros({units_[seg.unit]->shard_numel()}, t.dtype(), t.device());
      if (seg.length > 0) nograd::copy_(nograd::narrow(slice, 0, seg.start, seg.length), t);
    }
  }
  for (auto& [u, slots] : gathered)
    for (auto& [slot, t] : slots) {
      Tensor full = empty({units_[u]->padded_numel()}, t.dtype(), t.device());
      comm.all_gather(t, full);
      t = full;
    }
  optim::StateDict out;
  out.emplace_back("lr", scalar_tensor(user_.lr(), DType::f64));
  for (size_t i = 0; i < segment_of_user_.size(); ++i) {
    const auto it = state.find(segment_of_user_[i]);
    if (it == state.end()) continue;  // no state yet
    const Segment& seg = segments_[it->first];
    for (const auto& [slot, t] : it->second) {
      const Tensor value =
          t.dim() == 0 ? nograd::clone(t) : nograd::clone(units_[seg.unit]->param_view(gathered[seg.unit][slot], seg.param));
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

StateShard ShardOptimizer::state_shard() const {
  NoGradGuard no_grad;
  const auto state = segment_state();
  StateShard out;
  auto add = [&out](std::string key, Tensor t, ShardPlace place) {
    out.local.emplace_back(std::move(key), std::move(t));
    out.places.push_back(std::move(place));
  };
  add("lr", scalar_tensor(user_.lr(), DType::f64), {});
  for (size_t i = 0; i < segment_of_user_.size(); ++i) {
    const auto it = state.find(segment_of_user_[i]);
    if (it == state.end()) continue;  // no state yet
    const Segment& seg = segments_[it->first];
    const FlatUnit& unit = *units_[seg.unit];
    const FlatUnit::HeldRun run = unit.held_run(seg.param);
    for (const auto& [slot, t] : it->second) {
      const std::string key = fmt::format("state.{}.{}", i, slot);
      if (t.dim() == 0) {  // a count (Adam's step): every rank holds the parameter's
        add(key, t, {});
        continue;
      }
      if (t.numel() != seg.length)
        throw Error(fmt::format("ShardOptimizer: the state '{}' of a segment of {} elements has {}; a sharded "
                                "optimizer's slots must be counts or per element",
                                slot, seg.length, t.numel()));
      // The segment starts at the run (and may go on into the padding).
      const Tensor piece = run.numel == 0 ? empty({0}, t.dtype(), t.device()) : nograd::narrow(t, 0, 0, run.numel);
      add(key, piece, ElementRun{run.param_offset, unit.params()[seg.param].shape()});
    }
  }
  for (const auto& [key, t] : user_.state_dict())  // the groups' settings and memberships, from the user's
    if (key.rfind("param_group", 0) == 0) add(key, t, {});
  return out;
}

void ShardOptimizer::load_full_state_dict(const optim::StateDict& state) { load_state(DictStateReader(state)); }

void ShardOptimizer::load_state(const StateReader& state) {
  NoGradGuard no_grad;
  // Per segment: its slots, each count whole and each per-element slot as the run of the parameter
  // that the segment holds (zeros over the padding).
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> by_segment;
  for (size_t e = 0; e < state.entries().size(); ++e) {
    const StateEntry& entry = state.entries()[e];
    size_t i = 0;
    std::string slot;
    if (!optim::parse_state_key(entry.name, i, slot)) continue;
    if (i >= segment_of_user_.size())
      throw Error(fmt::format("load_state_dict: the state has 'state.{}.*' but the optimizer has {} parameters", i,
                              segment_of_user_.size()));
    const size_t k = segment_of_user_[i];
    const Segment& seg = segments_[k];
    const FlatUnit& unit = *units_[seg.unit];
    if (entry.shape.empty()) {
      by_segment[k].emplace_back(slot, nograd::clone(state.read_whole(e)));
      continue;
    }
    const Shape& param_shape = unit.params()[seg.param].shape();
    if (entry.shape != param_shape)
      throw Error(fmt::format("load_state_dict: 'state.{}.{}' has shape {}, the parameter {}", i, slot,
                              shape_str(entry.shape), shape_str(param_shape)));
    Tensor values = zeros({seg.length}, entry.dtype, unit.device());
    const FlatUnit::HeldRun run = unit.held_run(seg.param);
    if (run.numel > 0) nograd::copy_(nograd::narrow(values, 0, 0, run.numel), state.read(e, run.param_offset, run.numel));
    by_segment[k].emplace_back(slot, values);
  }
  // The lr and the groups' settings go to the user's optimizer (which checks the memberships), and a
  // shard optimizer at those settings takes each segment's state.
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
  for (size_t p = 0; p < segment_of_param_.size(); ++p) {
    const auto it = by_segment.find(segment_of_param_[p]);
    if (it == by_segment.end()) continue;
    for (const auto& [slot, t] : it->second) shard_state.emplace_back(fmt::format("state.{}.{}", p, slot), t);
  }
  shard_optimizer_->load_state_dict(shard_state);
}

}  // namespace accel
