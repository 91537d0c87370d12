// ZeroStrategy: units and their shards, the reduce-scatter of a unit's grads, the shard update, the
// norm over shards, the optimizer state moved between the shards and the user's layout, and each
// rank's share of the state for per-rank checkpoint shards.
#include "runtime/strategy/zero_strategy.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "runtime/strategy/deferred_init_agreement.h"
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

ZeroStrategy::~ZeroStrategy() { wait_all_quietly(); }

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
  units_.push_back(std::move(unit));
  return *units_.back();
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
    shards.push_back(u->shard);
  }
  optimizers_.push_back(std::make_unique<ShardOptimizer>(optimizer, units, shards, name()));
}

std::vector<Tensor> ZeroStrategy::local_grads(const std::vector<Tensor>& params) const {
  std::unordered_set<const TensorImpl*> wanted;
  for (const Tensor& p : params) wanted.insert(p.impl());
  std::vector<Tensor> grads;
  for (const auto& u : units_) {
    if (!u->shard_grad.defined()) continue;
    for (const Tensor& p : u->flat->params())
      if (wanted.count(p.impl())) {
        grads.push_back(u->shard_grad);
        break;
      }
  }
  return grads;
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
  }
  for (const auto& o : optimizers_) held.optimizer_state += o->state_bytes();
  return held;
}

double ZeroStrategy::combine_norm(double local, bool inf_norm) const {
  Tensor value = scalar_tensor(local, DType::f64, comm_->device());
  comm_->all_reduce(value, inf_norm ? ReduceOp::max : ReduceOp::sum, "zero gradient norm");
  return value.item();
}

void ZeroStrategy::start_reduce_scatter(Unit& unit, const Tensor& flat_grad) {
  NoGradGuard no_grad;
  const bool narrow_wire = flat_grad.dtype() == DType::f32 && comm_dtype_ != DType::f32;
  unit.wire_in = narrow_wire ? nograd::to_dtype(flat_grad, comm_dtype_) : flat_grad;
  unit.wire_out = empty({unit.flat->shard_numel()}, unit.wire_in.dtype(), unit.wire_in.device());
  unit.work = comm_->reduce_scatter_async(unit.wire_in, unit.wire_out, ReduceOp::avg,
                                          CallSite::gradient_sync(fmt::format("zero reduce-scatter of {}", unit.flat->name())));
}

void ZeroStrategy::finish_reduce_scatter(Unit& unit, bool add) {
  if (!unit.work.valid()) return;
  NoGradGuard no_grad;
  unit.work.wait();
  unit.work = Work();
  Tensor slice = unit.wire_out.dtype() == unit.flat->dtype() ? unit.wire_out
                                                               : nograd::to_dtype(unit.wire_out, unit.flat->dtype());
  unit.wire_in = Tensor();
  unit.wire_out = Tensor();
  if (add && unit.shard_grad.defined()) nograd::add_(unit.shard_grad, slice);
  else unit.shard_grad = slice;
  unit.shard.set_grad(unit.shard_grad);
}

void ZeroStrategy::start_slice_reduce_scatter(Unit& unit) {
  NoGradGuard no_grad;
  const Tensor& flat_grad = unit.flat->full_grad();
  const bool narrow_wire = flat_grad.dtype() == DType::f32 && comm_dtype_ != DType::f32;
  unit.wire_in = narrow_wire ? nograd::to_dtype(flat_grad, comm_dtype_) : flat_grad;
  unit.wire_out = unit.flat->shard_of(unit.wire_in);  // this rank's slot of the input: in place
  unit.work = comm_->reduce_scatter_async(unit.wire_in, unit.wire_out, ReduceOp::avg,
                                          CallSite::gradient_sync(fmt::format("zero reduce-scatter of {}", unit.flat->name())));
}

void ZeroStrategy::finish_slice_reduce_scatter(Unit& unit) {
  if (!unit.work.valid()) return;
  NoGradGuard no_grad;
  unit.work.wait();
  unit.work = Work();
  const Tensor& flat_grad = unit.flat->full_grad();
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

void ZeroStrategy::optimizer_step(optim::Optimizer& optimizer) {
  for (const auto& o : optimizers_) {
    if (&o->user() != &optimizer) continue;
    o->step();
    for (auto& u : units_)
      for (const FlatUnit* f : o->units())
        if (u->flat.get() == f) after_shard_update(*u);
    return;
  }
  throw Error(fmt::format("{}: optimizer_step of an optimizer that was not prepared", name()));
}

void ZeroStrategy::zero_grad(optim::Optimizer& optimizer, bool set_to_none) {
  for (const auto& o : optimizers_) {
    if (&o->user() != &optimizer) continue;
    for (auto& u : units_)
      for (const FlatUnit* f : o->units()) {
        if (u->flat.get() != f) continue;
        // Full grads are dropped either way (the next backward lends zeroed ones); shard grads are
        // zeroed in place when asked, like a plain optimizer's. Stage 1's shard grad is a view of
        // the full grad, which it must not keep alive: it gets zeros of its own.
        const bool view_of_full = is_view_of(u->shard_grad, u->flat->full_grad());
        u->flat->drop_grads();
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

std::optional<StateShard> ZeroStrategy::model_state_shard(const nn::Module& model) const {
  std::unordered_map<const TensorImpl*, std::pair<const Unit*, size_t>> where;  // param -> unit, index
  for (const auto& u : units_)
    if (u->model == &model)
      for (size_t j = 0; j < u->flat->params().size(); ++j) where[u->flat->params()[j].impl()] = {u.get(), j};
  if (where.empty()) return std::nullopt;  // not prepared here
  NoGradGuard no_grad;
  StateShard shard{.local = {}, .places = {}, .part = comm_->rank(), .parts = comm_->size(), .writer = true};
  for (const auto& [name, t] : model.state_dict()) {
    const auto it = where.find(t.impl());
    if (it == where.end()) {  // a buffer: the same on every rank
      shard.local.emplace_back(name, t);
      shard.places.emplace_back();
      continue;
    }
    // From the rank's shard, which is current under every stage (stage 3's parameters are released).
    const auto& [unit, j] = it->second;
    const FlatUnit::HeldRun run = unit->flat->held_run(j);
    shard.local.emplace_back(name, run.numel == 0 ? empty({0}, t.dtype(), unit->shard.device())
                                                  : nograd::narrow(unit->shard, 0, run.shard_offset, run.numel));
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
