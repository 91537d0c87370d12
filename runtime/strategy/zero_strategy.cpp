// ZeroStrategy: units and their shards, the reduce-scatter of a unit's grads, the shard update, the
// norm over shards, the optimizer state moved between the shards and the user's layout, and each
// rank's share of the state for per-rank checkpoint shards.
#include "runtime/strategy/zero_strategy.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "runtime/strategy/deferred_init_agreement.h"
#include "runtime/strategy/grad_average.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

// Whether t shares base's storage (a shard grad that is a slice of the full grad).
bool is_view_of(const Tensor& t, const Tensor& base) {
  return t.defined() && base.defined() && t.storage() == base.storage();
}

}  // namespace

ZeroStrategy::ZeroStrategy(int stage, Device device, std::shared_ptr<Communicator> comm, DType comm_dtype)
    : stage_(stage), device_(device), comm_(std::move(comm)), comm_dtype_(comm_dtype) {
  if (stage < 1 || stage > 3)
    throw Error(fmt::format("ZeroStrategy: zero_stage must be 1, 2 or 3 here, got {}", stage));
  if (!comm_) throw Error("ZeroStrategy: got a null communicator");
}

ZeroStrategy::~ZeroStrategy() {
  wait_all_quietly();
  for (HookHandle& hook : reach_hooks_) hook.remove();
}

void ZeroStrategy::shard_masters_in(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw Error(fmt::format("{}::shard_masters_in: expected bf16, f16 or f32 (masters whole), got {}", name(),
                            dtype_name(dtype)));
  if (!units_.empty())
    throw Error(fmt::format("{}::shard_masters_in: called after a model was prepared; call it before", name()));
  model_dtype_ = dtype;
}

std::string ZeroStrategy::name() const { return fmt::format("zero_{}", stage_); }

DataShard ZeroStrategy::data_shard() const { return {comm_->rank(), comm_->size()}; }

void ZeroStrategy::broadcast_from_main(const nn::StateDict& entries) const {
  broadcast_from_rank0(entries, [this](const Tensor&) -> Communicator& { return *comm_; }, "zero");
}

void ZeroStrategy::check_deferred_init(const nn::StateDict& entries) const {
  check_deferred_init_agrees(entries, *comm_, name());
}

ZeroStrategy::Unit& ZeroStrategy::add_unit(const nn::Module& model, const std::string& name,
                                           const nn::StateDict& params) {
  auto unit = std::make_unique<Unit>();
  unit->model = &model;
  unit->flat = std::make_unique<FlatUnit>(name, params, comm_->rank(), comm_->size());
  unit->shard = unit->flat->shard_of(unit->flat->full());
  unit->shard.requires_grad_();
  unit->master = unit->shard;
  unit->has_grad.assign(unit->flat->params().size(), false);
  for (size_t j = 0; j < unit->flat->params().size(); ++j)
    reach_hooks_.push_back(
        unit->flat->params()[j].add_grad_ready_hook([flags = &unit->has_grad, j](Tensor&) { (*flags)[j] = true; }));
  units_.push_back(std::move(unit));
  return *units_.back();
}

void ZeroStrategy::split_master(Unit& unit, bool own_shard) {
  if (model_dtype_ == DType::f32 || unit.flat->dtype() != DType::f32) {
    unit.master = unit.shard;
    return;
  }
  NoGradGuard no_grad;
  // A rank that owns its slice (stage 3) reads it there: under deferred init the full buffer never held data.
  unit.master = nograd::clone(own_shard ? unit.shard : unit.flat->shard_of(unit.flat->full()));
  unit.master.requires_grad_();
  unit.flat->convert_to(model_dtype_);
  unit.shard = own_shard ? nograd::to_dtype(unit.master, model_dtype_) : unit.flat->shard_of(unit.flat->full());
  unit.shard.requires_grad_();
}

void ZeroStrategy::refresh_master_grads() {
  NoGradGuard no_grad;
  for (auto& u : units_)
    if (has_own_master(*u) && u->shard_grad.defined())  // a copy: the precision unscales it in place
      u->master.set_grad(u->shard_grad.dtype() == DType::f32 ? nograd::clone(u->shard_grad)
                                                              : nograd::to_dtype(u->shard_grad, DType::f32));
}

void ZeroStrategy::load_masters(const nn::Module& model, const nn::StateDict& state) {
  std::unordered_map<const TensorImpl*, std::pair<Unit*, size_t>> where;  // param -> unit, index
  for (auto& u : units_)
    if (u->model == &model && has_own_master(*u))
      for (size_t j = 0; j < u->flat->params().size(); ++j) where[u->flat->params()[j].impl()] = {u.get(), j};
  if (where.empty()) return;
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) given[name] = &t;
  NoGradGuard no_grad;
  for (const auto& [name, p] : model.named_parameters()) {
    const auto at = where.find(p.impl());
    const auto it = given.find(name);
    if (at == where.end() || it == given.end()) continue;  // a missing key: load_state_dict reported it
    const auto& [unit, j] = at->second;
    const FlatUnit::HeldRun run = unit->flat->held_run(j);
    if (run.numel == 0) continue;
    const Tensor flat = nograd::view(nograd::contiguous(*it->second), {it->second->numel()});
    nograd::copy_(nograd::narrow(unit->master, 0, run.shard_offset, run.numel),
                  nograd::narrow(flat, 0, run.param_offset, run.numel));
  }
}

std::vector<const FlatUnit*> ZeroStrategy::units_of(const nn::Module& model) const {
  std::vector<const FlatUnit*> out;
  for (const auto& u : units_)
    if (u->model == &model) out.push_back(u->flat.get());
  return out;
}

void ZeroStrategy::prepare_optimizer(optim::Optimizer& optimizer) {
  for (const auto& o : optimizers_)
    if (&o->user() == &optimizer) throw Error("Accelerator::prepare: this optimizer was prepared already");
  // The units that hold the optimizer's parameters, in unit order.
  std::unordered_set<const TensorImpl*> mine;
  for (const Tensor& p : optimizer.params()) mine.insert(p.impl());
  std::vector<const FlatUnit*> units;
  std::vector<Tensor> shards;
  for (const auto& u : units_) {
    bool holds = false;
    for (const Tensor& p : u->flat->params()) holds = holds || mine.count(p.impl()) > 0;
    if (!holds) continue;
    units.push_back(u->flat.get());
    shards.push_back(u->master);
  }
  optimizers_.push_back(std::make_unique<ShardOptimizer>(optimizer, units, shards, name()));
}

std::vector<Tensor> ZeroStrategy::local_grads(const std::vector<Tensor>& params) const {
  std::unordered_set<const TensorImpl*> wanted;
  for (const Tensor& p : params) wanted.insert(p.impl());
  std::vector<Tensor> grads;
  for (const auto& u : units_) {
    const Tensor grad = has_own_master(*u) ? u->master.grad() : u->shard_grad;
    if (!grad.defined()) continue;
    for (const Tensor& p : u->flat->params())
      if (wanted.count(p.impl())) {
        grads.push_back(grad);
        break;
      }
  }
  return grads;
}

void ZeroStrategy::reduce_over_slices(Tensor& values, ReduceOp op, const char* what) const {
  if (comm_->size() > 1) comm_->all_reduce(values, op, what);
}

std::vector<std::pair<Tensor, Tensor>> ZeroStrategy::local_grad_runs(const std::vector<Tensor>& params) const {
  std::unordered_set<const TensorImpl*> wanted;
  for (const Tensor& p : params) wanted.insert(p.impl());
  std::vector<std::pair<Tensor, Tensor>> runs;
  NoGradGuard no_grad;
  for (const auto& u : units_) {
    const Tensor grad = has_own_master(*u) ? u->master.grad() : u->shard_grad;
    if (!grad.defined()) continue;
    for (size_t j = 0; j < u->flat->params().size(); ++j) {
      const Tensor& p = u->flat->params()[j];
      const FlatUnit::HeldRun run = u->flat->held_run(j);
      if (wanted.count(p.impl()) && run.numel > 0) runs.emplace_back(p, nograd::narrow(grad, 0, run.shard_offset, run.numel));
    }
  }
  return runs;
}

ZeroStrategy::HeldBytes ZeroStrategy::held_bytes() const {
  HeldBytes held;
  for (const auto& u : units_) {
    const FlatUnit& flat = *u->flat;
    if (!flat.full().storage()->is_released()) held.parameters += static_cast<int64_t>(flat.full().nbytes());
    if (u->shard.storage() != flat.full().storage()) held.parameters += static_cast<int64_t>(u->shard.nbytes());
    if (flat.full_grad().defined()) held.gradients += static_cast<int64_t>(flat.full_grad().nbytes());
    for (const Tensor& p : flat.params()) {
      const Tensor g = p.grad();
      const bool own = g.defined() && !(flat.full_grad().defined() && g.storage() == flat.full_grad().storage());
      if (own) held.gradients += static_cast<int64_t>(g.nbytes());
    }
    if (u->shard_grad.defined() && !is_view_of(u->shard_grad, flat.full_grad())) held.gradients += static_cast<int64_t>(u->shard_grad.nbytes());
    if (has_own_master(*u)) {
      held.master_weights += static_cast<int64_t>(u->master.nbytes());
      if (u->master.grad().defined()) held.gradients += static_cast<int64_t>(u->master.grad().nbytes());
    }
  }
  for (const auto& o : optimizers_) held.optimizer_state += o->state_bytes();
  return held;
}

double ZeroStrategy::combine_norm(double local, bool inf_norm) const {
  Tensor value = scalar_tensor(local, DType::f64, comm_->device());
  comm_->all_reduce(value, inf_norm ? ReduceOp::max : ReduceOp::sum, "zero gradient norm");
  return value.item();
}

Tensor ZeroStrategy::wire_of(const Tensor& flat_grad) const {
  return nograd::to_dtype(flat_grad, comm_dtype_);
}

void ZeroStrategy::start_reduce_scatter(Unit& unit, const Tensor& flat_grad) {
  NoGradGuard no_grad;
  unit.wire_in = wire_of(flat_grad);
  unit.wire_out = empty({unit.flat->shard_numel()}, unit.wire_in.dtype(), unit.wire_in.device());
  unit.work = comm_->reduce_scatter_async(unit.wire_in, unit.wire_out, predivide_for_average(unit.wire_in, comm_->size()),
                                          CallSite::gradient_sync(fmt::format("zero reduce-scatter of {}", unit.flat->name())));
}

void ZeroStrategy::finish_reduce_scatter(Unit& unit, bool add) {
  if (!unit.work.valid()) return;
  NoGradGuard no_grad;
  unit.work.wait();
  unit.work = Work();
  Tensor slice = widens(unit) ? unit.wire_out : nograd::to_dtype(unit.wire_out, unit.flat->dtype());
  unit.wire_in = Tensor();
  unit.wire_out = Tensor();
  if (add && unit.shard_grad.defined()) nograd::add_(unit.shard_grad, slice);
  else unit.shard_grad = slice;
  unit.shard.set_grad(unit.shard_grad);
}

void ZeroStrategy::start_slice_reduce_scatter(Unit& unit) {
  NoGradGuard no_grad;
  const Tensor& flat_grad = unit.flat->full_grad();
  unit.wire_in = wire_of(flat_grad);
  unit.wire_out = unit.flat->shard_of(unit.wire_in);  // this rank's slot of the input: in place
  unit.work = comm_->reduce_scatter_async(unit.wire_in, unit.wire_out, predivide_for_average(unit.wire_in, comm_->size()),
                                          CallSite::gradient_sync(fmt::format("zero reduce-scatter of {}", unit.flat->name())));
}

void ZeroStrategy::finish_slice_reduce_scatter(Unit& unit) {
  if (!unit.work.valid()) return;
  NoGradGuard no_grad;
  unit.work.wait();
  unit.work = Work();
  const Tensor& flat_grad = unit.flat->full_grad();
  if (widens(unit)) {
    Tensor slice = nograd::clone(unit.wire_out);
    unit.wire_in = Tensor();
    unit.wire_out = Tensor();
    nograd::zero_(flat_grad);
    if (unit.shard_grad.defined()) nograd::add_(slice, unit.shard_grad);
    unit.shard_grad = slice;
    unit.shard.set_grad(slice);
    return;
  }
  const Tensor slice = unit.flat->shard_of(flat_grad);
  if (!is_view_of(unit.wire_out, flat_grad)) nograd::copy_(slice, unit.wire_out);
  unit.wire_in = Tensor();
  unit.wire_out = Tensor();
  // The other ranks' parts hold this rank's local grads, which their owners have averaged: zeroed,
  // so that the next sync without zero_grad adds nothing stale.
  const int64_t offset = unit.flat->shard_offset(), size = unit.flat->shard_numel();
  if (offset > 0) nograd::zero_(nograd::narrow(flat_grad, 0, 0, offset));
  const int64_t after = unit.flat->padded_numel() - offset - size;
  if (after > 0) nograd::zero_(nograd::narrow(flat_grad, 0, offset + size, after));
  if (unit.shard_grad.defined() && !is_view_of(unit.shard_grad, flat_grad)) nograd::add_(slice, unit.shard_grad);
  unit.shard_grad = slice;
  unit.shard.set_grad(slice);
}

void ZeroStrategy::carry_synced_slice(Unit& unit) {
  if (!is_view_of(unit.shard_grad, unit.flat->full_grad())) return;
  NoGradGuard no_grad;
  unit.shard_grad = nograd::clone(unit.shard_grad);
  unit.shard.set_grad(unit.shard_grad);
  nograd::zero_(unit.flat->shard_of(unit.flat->full_grad()));
}

void ZeroStrategy::wait_all_quietly() {
  for (auto& u : units_) {
    if (!u->work.valid()) continue;
    try {
      u->work.wait();
    } catch (const Error&) {
      // A failed collective of a backward being abandoned: the error was or will be reported there.
    }
    u->work = Work();
  }
}

const optim::Optimizer& ZeroStrategy::updating_optimizer(const optim::Optimizer& optimizer) const {
  for (const auto& o : optimizers_)
    if (&o->user() == &optimizer) return o->shard_optimizer();
  return optimizer;  // not prepared here: it updates itself, if at all
}

void ZeroStrategy::max_over_all_ranks(Tensor& flags) const {
  if (comm_->size() > 1) comm_->all_reduce(flags, ReduceOp::max, "zero parameters with a grad");
}

std::vector<ZeroStrategy::Unit*> ZeroStrategy::units_in(const ShardOptimizer& o) const {
  std::vector<Unit*> out;
  for (const FlatUnit* f : o.units())
    for (const auto& u : units_)
      if (u->flat.get() == f) out.push_back(u.get());
  return out;
}

std::vector<std::vector<bool>> ZeroStrategy::params_with_grad(const ShardOptimizer& o) const {
  const std::vector<Unit*> units = units_in(o);
  std::vector<float> local;
  for (const Unit* u : units)
    for (const bool reached : u->has_grad) local.push_back(reached ? 1.0f : 0.0f);
  Tensor flags = from_vector(local, comm_->device());
  max_over_all_ranks(flags);
  const std::vector<float> any = flags.to_vector<float>();
  std::vector<std::vector<bool>> out;
  size_t at = 0;
  for (const Unit* u : units) {
    out.emplace_back();
    for (size_t j = 0; j < u->has_grad.size(); ++j) out.back().push_back(any[at++] != 0.0f);
  }
  return out;
}

void ZeroStrategy::optimizer_step(optim::Optimizer& optimizer) {
  for (const auto& o : optimizers_) {
    if (&o->user() != &optimizer) continue;
    o->step(params_with_grad(*o));
    for (Unit* u : units_in(*o)) {
      if (has_own_master(*u)) {
        // The updated f32 slice, rounded to the 16-bit slice that is gathered (half the bytes).
        NoGradGuard no_grad;
        nograd::copy_(u->shard, u->master);
        u->master.set_grad(Tensor());
      }
      after_shard_update(*u);
    }
    return;
  }
  throw Error(fmt::format("{}: optimizer_step of an optimizer that was not prepared", name()));
}

void ZeroStrategy::zero_grad(optim::Optimizer& optimizer, bool set_to_none) {
  for (const auto& o : optimizers_) {
    if (&o->user() != &optimizer) continue;
    for (Unit* u : units_in(*o)) {
      // Full grads are dropped either way (the next backward lends zeroed ones); shard grads are
      // zeroed in place when asked, like a plain optimizer's. Stage 1's shard grad is a view of
      // the full grad, which it must not keep alive: it gets zeros of its own.
      const bool view_of_full = is_view_of(u->shard_grad, u->flat->full_grad());
      u->flat->drop_grads();
      if (has_own_master(*u)) u->master.set_grad(Tensor());  // made again from shard_grad at the next sync
      if (set_to_none) u->has_grad.assign(u->has_grad.size(), false);
      if (set_to_none || !u->shard_grad.defined()) {
        u->shard_grad = Tensor();
        u->shard.set_grad(Tensor());
      } else if (view_of_full) {
        u->shard_grad = zeros({u->flat->shard_numel()}, u->flat->dtype(), u->flat->device());
        u->shard.set_grad(u->shard_grad);
      } else {
        nograd::zero_(u->shard_grad);
      }
    }
    return;
  }
  optimizer.clear_grads(set_to_none);  // an optimizer over no prepared model
}

nn::StateDict ZeroStrategy::model_state_dict(const nn::Module& model) const {
  bool gathers = false;
  for (const auto& u : units_) gathers = gathers || (u->model == &model && (stage_ == 3 || has_own_master(*u)));
  if (!gathers) return Strategy::model_state_dict(model);  // whole on every rank already
  NoGradGuard no_grad;
  // Each unit's master slices gathered into a new flat tensor; every parameter is a copy of its part.
  std::unordered_map<const TensorImpl*, Tensor> full_of;
  for (const auto& u : units_) {
    if (u->model != &model) continue;
    Tensor full = empty({u->flat->padded_numel()}, u->master.dtype(), u->master.device());
    comm_->all_gather(u->master, full, fmt::format("zero state-dict gather of {}", u->flat->name()));
    for (size_t j = 0; j < u->flat->params().size(); ++j)
      full_of[u->flat->params()[j].impl()] = nograd::clone(u->flat->param_view(full, j));
  }
  nn::StateDict out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace_back(name, full_of.at(p.impl()));
  for (const auto& entry : model.named_buffers()) out.push_back(entry);
  return out;
}

nn::LoadResult ZeroStrategy::load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) {
  nn::LoadResult result = Strategy::load_model_state_dict(model, state, strict);
  load_masters(model, state);
  return result;
}

optim::StateDict ZeroStrategy::optimizer_state_dict(const optim::Optimizer& optimizer) const {
  for (const auto& o : optimizers_)
    if (&o->user() == &optimizer) return o->full_state_dict(*comm_);
  return optimizer.state_dict();
}

void ZeroStrategy::load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) {
  for (const auto& o : optimizers_)
    if (&o->user() == &optimizer) return o->load_full_state_dict(state);
  optimizer.load_state_dict(state);
}

void ZeroStrategy::load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state) {
  for (const auto& o : optimizers_)
    if (&o->user() == &optimizer) return o->load_state(state);
  Strategy::load_optimizer_state(optimizer, state);
}

std::optional<StateShard> ZeroStrategy::model_state_shard(const nn::Module& model) const {
  std::unordered_map<const TensorImpl*, std::pair<const Unit*, size_t>> where;  // param -> unit, index
  for (const auto& u : units_)
    if (u->model == &model)
      for (size_t j = 0; j < u->flat->params().size(); ++j) where[u->flat->params()[j].impl()] = {u.get(), j};
  if (where.empty()) return std::nullopt;  // not prepared here
  NoGradGuard no_grad;
  StateShard shard{.local = {}, .places = {}, .part = comm_->rank(), .parts = comm_->size(), .writer = true,
                   .written_elsewhere = {}};
  for (const auto& [name, t] : model.state_dict()) {
    const auto it = where.find(t.impl());
    if (it == where.end()) {  // a buffer: the same on every rank
      shard.local.emplace_back(name, t);
      shard.places.emplace_back();
      continue;
    }
    // From the rank's master slice, which is current under every stage (stage 3's parameters are
    // released) and is f32 where the parameters are 16-bit: the truth a resume starts from.
    const auto& [unit, j] = it->second;
    const FlatUnit::HeldRun run = unit->flat->held_run(j);
    shard.local.emplace_back(name, run.numel == 0 ? empty({0}, unit->master.dtype(), unit->master.device())
                                                  : nograd::narrow(unit->master, 0, run.shard_offset, run.numel));
    shard.places.emplace_back(ElementRun{run.param_offset, t.shape()});
  }
  return shard;
}

std::optional<StateShard> ZeroStrategy::optimizer_state_shard(const optim::Optimizer& optimizer) const {
  for (const auto& o : optimizers_) {
    if (&o->user() != &optimizer) continue;
    StateShard shard = o->state_shard();
    shard.part = comm_->rank();
    shard.parts = comm_->size();
    return shard;
  }
  return std::nullopt;  // not prepared here: saved whole
}

}  // namespace accel
