// ZeroStage3: the units from auto_wrap, gather / free around each unit's forward with prefetch, the
// identity whose backward gathers a unit again, the per-unit reduce-scatter, and full state.
#include "runtime/strategy/zero_stage3.h"

#include <fmt/format.h>

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "nn/state_match.h"
#include "runtime/safetensors.h"
#include "runtime/strategy/deferred_init_agreement.h"
#include "runtime/strategy/zero_auto_wrap.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

ZeroStage3::ZeroStage3(Device device, std::shared_ptr<Communicator> comm, DType comm_dtype, AutoWrapPolicy auto_wrap,
                       bool reshard_after_forward)
    : ZeroStrategy(3, device, std::move(comm), comm_dtype),
      auto_wrap_(std::move(auto_wrap)),
      reshard_after_forward_(reshard_after_forward) {}

void ZeroStage3::prepare_model(nn::Module& model) {
  for (const auto& u : units_)
    if (u->model == &model) throw Error("Accelerator::prepare: this model was prepared already");
  model.to(device());
  // Every rank starts from rank 0's values; deferred-init parameters from their recipes, which must
  // agree (checked first, so that no rank broadcasts what another materialises).
  check_deferred_init(model.named_parameters());
  broadcast_from_main(materialised_entries(model.named_parameters()));
  broadcast_from_main(model.named_buffers());
  const std::vector<WrappedUnit> wrapped = auto_wrap_units(model, auto_wrap_);
  if (wrapped.empty()) throw Error("Accelerator::prepare: under ZeRO the model must have parameters");
  std::vector<nn::Module*> modules;
  NoGradGuard no_grad;
  for (const WrappedUnit& w : wrapped) {
    Unit& unit = add_unit(model, w.name.empty() ? "(root)" : w.name, w.params);
    // The rank keeps a copy of its slice; the whole buffer is given back until the unit is used.
    unit.shard = unit.flat->take_initial_shard();
    unit.shard.requires_grad_();
    split_master(unit, /*own_shard=*/true);  // under bf16/fp16: an f32 master slice, a 16-bit shard
    unit.flat->full().storage()->release();
    places_.push_back({w.module, w.name.empty(), false, Work(), false});
    modules.push_back(w.module);
  }
  hook_units(modules);
}

size_t ZeroStage3::unit_of(const nn::Module& module) const {
  for (size_t u = 0; u < places_.size(); ++u)
    if (places_[u].module == &module) return u;
  throw Error(fmt::format("{}: module {} is not a unit of a prepared model", name(), module.type_name()));
}

std::vector<std::string> ZeroStage3::unit_names(const nn::Module& model) const {
  std::vector<std::string> out;
  for (const auto& u : units_)
    if (u->model == &model) out.push_back(u->flat->name());
  return out;
}

void ZeroStage3::start_gather(size_t u) {
  Place& place = places_[u];
  if (place.gathered || place.gather.valid()) return;
  const FlatUnit& flat = *units_[u]->flat;
  flat.full().storage()->reallocate();
  place.gather = comm().all_gather_async(units_[u]->shard, flat.full(), fmt::format("zero all-gather unit {}", u));
  events_.push_back({ZeroEvent::Kind::gather, u});
}

void ZeroStage3::gather(size_t u) {
  start_gather(u);
  Place& place = places_[u];
  if (place.gather.valid()) {
    place.gather.wait();
    place.gather = Work();
  }
  place.gathered = true;
}

void ZeroStage3::free(size_t u) {
  Place& place = places_[u];
  if (place.gather.valid()) {  // a prefetch still writing into the buffer
    place.gather.wait();
    place.gather = Work();
  }
  if (!place.gathered && units_[u]->flat->full().storage()->is_released()) return;
  units_[u]->flat->full().storage()->release();
  place.gathered = false;
  events_.push_back({ZeroEvent::Kind::free, u});
}

void ZeroStage3::prefetch(size_t u, int step) {
  // The non-root units of u's model in forward order; the root counts as standing before the first.
  std::vector<size_t> order;
  for (size_t k = 0; k < places_.size(); ++k)
    if (units_[k]->model == units_[u]->model && !places_[k].root) order.push_back(k);
  long at = -1;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] == u) at = static_cast<long>(i);
  const long next = at + step;
  if (next >= 0 && next < static_cast<long>(order.size())) start_gather(order[static_cast<size_t>(next)]);
}

void ZeroStage3::before_unit_forward(nn::Module& module) {
  const size_t u = unit_of(module);
  gather(u);
  prefetch(u, +1);
}

void ZeroStage3::after_unit_forward(nn::Module& module, Tensor& output) {
  const size_t u = unit_of(module);
  if (places_[u].root) return;  // the root stays gathered until its backward is over
  if (reshard_after_forward_) free(u);
  if (!GradMode::is_enabled() || !output.requires_grad()) return;
  // An identity on the unit's output: its backward is the first of the unit's to run, and gathers the
  // parameters the unit's own backward reads.
  Tensor alias = Tensor::make_view(output.storage(), output.shape(), output.strides(), output.offset(), output.dtype());
  autograd::record("ZeroGatherForBackward", {output}, {alias}, [this, u](const std::vector<Tensor>& grads) {
    begin_unit_backward(u);
    return std::vector<Tensor>{grads[0]};
  });
  output = alias;
}

void ZeroStage3::begin_unit_backward(size_t u) {
  gather(u);
  prefetch(u, -1);
  units_[u]->flat->lend_grads();
}

void ZeroStage3::before_backward(bool) {
  if (in_backward_) backward_failed();
  in_backward_ = true;
  for (size_t u = 0; u < places_.size(); ++u) {
    places_[u].reduced = false;
    if (places_[u].root) units_[u]->flat->lend_grads();  // gathered since the forward
  }
}

void ZeroStage3::after_unit_backward(nn::Module& module) {
  if (in_backward_) reduce_unit(unit_of(module));
}

void ZeroStage3::reduce_unit(size_t u) {
  Place& place = places_[u];
  if (place.reduced) return;
  place.reduced = true;
  FlatUnit& flat = *units_[u]->flat;
  if (!flat.full_grad().defined()) flat.lend_grads();  // backward never reached it: zeros
  start_reduce_scatter(*units_[u], flat.full_grad());  // holds the flat grads until it is done
  flat.drop_grads();
  events_.push_back({ZeroEvent::Kind::reduce_scatter, u});
  if (!place.root) free(u);
  after_reduce_started(u);
}

void ZeroStage3::after_backward() {
  if (!in_backward_) throw Error(fmt::format("{}: after_backward without before_backward", name()));
  in_backward_ = false;
  // Units whose last grad never came go now, in unit order (the same on every rank).
  for (size_t u = 0; u < places_.size(); ++u) reduce_unit(u);
  for (auto& u : units_) finish_reduce_scatter(*u, /*add=*/true);
  for (size_t u = 0; u < places_.size(); ++u) free(u);
  refresh_master_grads();
}

void ZeroStage3::backward_failed() {
  in_backward_ = false;
  wait_all_quietly();
  for (size_t u = 0; u < places_.size(); ++u) {
    units_[u]->flat->drop_grads();
    free(u);
  }
}

void ZeroStage3::after_shard_update(Unit& unit) {
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].get() == &unit) free(u);
}

nn::LoadResult ZeroStage3::load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) {
  if (!prepared(model)) return ZeroStrategy::load_model_state_dict(model, state, strict);
  return load_model_state(model, DictStateReader(state), strict);
}

bool ZeroStage3::prepared(const nn::Module& model) const {
  for (const auto& u : units_)
    if (u->model == &model) return true;
  return false;
}

// Checks the state's names and shapes against model as load_state_dict does, then copies this rank's
// run of each parameter into its shard and master slice, and the buffers whole.
nn::LoadResult ZeroStage3::load_model_state(nn::Module& model, const StateReader& state, bool strict) {
  if (!prepared(model)) return ZeroStrategy::load_model_state(model, state, strict);
  std::vector<nn::NamedShape> given;
  for (const StateEntry& e : state.entries()) given.push_back({e.name, e.shape});
  std::unordered_map<const TensorImpl*, std::pair<size_t, size_t>> where;  // param -> unit, index
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->model == &model)
      for (size_t j = 0; j < units_[u]->flat->params().size(); ++j) where[units_[u]->flat->params()[j].impl()] = {u, j};
  const nn::StateDict own = model.state_dict();
  std::vector<nn::NamedShape> own_shapes;
  for (const auto& [name, t] : own) own_shapes.push_back({name, t.shape()});
  const nn::StateMatch match = nn::match_state(own_shapes, given, strict, model.type_name());
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->model == &model) free(u);  // a gathered buffer would no longer hold the slices
  NoGradGuard no_grad;
  for (const auto& [mine, theirs] : match.fits) {
    const Tensor& target = own[mine].second;
    const auto at = where.find(target.impl());
    if (at == where.end()) {  // a buffer: whole on every rank
      nograd::copy_(target, state.read_whole(theirs));
      continue;
    }
    Unit& unit = *units_[at->second.first];
    const FlatUnit::HeldRun run = unit.flat->held_run(at->second.second);
    if (run.numel == 0) continue;
    const Tensor values = state.read(theirs, run.param_offset, run.numel);
    nograd::copy_(nograd::narrow(unit.shard, 0, run.shard_offset, run.numel), values);  // rounded where 16-bit
    if (has_own_master(unit)) nograd::copy_(nograd::narrow(unit.master, 0, run.shard_offset, run.numel), values);
  }
  return match.result;
}

}  // namespace accel
