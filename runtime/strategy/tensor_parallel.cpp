// TensorParallel: the {dp, tp} mesh, the split of each prepared model, the reducer (or ZeRO) over dp,
// the norm over the whole model, and checkpoint state joined from (and cut into) the ranks' parts.
#include "runtime/strategy/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "autograd/grad_mode.h"
#include "nn/materialize.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/split_layer.h"
#include "nn/parallel/tensor_parallel_model.h"
#include "runtime/strategy/deferred_init_agreement.h"
#include "runtime/strategy/tensor_parallel_part_reader.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

int replicas(const Environment& env, int tp_size, int dp_size) {
  if (!env.comm()) throw Error("TensorParallel: the environment has no communicator between ranks");
  const int world = env.world_size();
  if (tp_size < 1 || world % tp_size != 0)
    throw Error(fmt::format("TensorParallel: tp_size {} does not divide the world size {}", tp_size, world));
  if (dp_size != 0 && dp_size * tp_size != world)
    throw Error(fmt::format("TensorParallel: dp_size {} x tp_size {} is {}, but the world size is {}", dp_size,
                            tp_size, dp_size * tp_size, world));
  return world / tp_size;
}

// The parameter whose per-element slot ('state.<i>.<slot>', not a 0-d count) key names, or null.
const Tensor* slot_param(const optim::Optimizer& optimizer, const std::string& key, const Shape& shape) {
  size_t index = 0;
  std::string slot;
  if (shape.empty() || !optim::parse_state_key(key, index, slot) || index >= optimizer.params().size()) return nullptr;
  return &optimizer.params()[index];
}

}  // namespace

TensorParallel::TensorParallel(const Environment& env, int tp_size, int dp_size, const ReducerOptions& options,
                               const ZeroOverDp& zero_over_dp)
    : env_(env), options_(options) {
  const int dp = replicas(env, tp_size, dp_size);
  mesh_ = std::make_unique<DeviceMesh>(env.grads_comm(), std::vector<MeshDim>{{"dp", dp}, {"tp", tp_size}});
  // Its collectives get a communicator (and communication thread) of their own, as the Reducer's do.
  if (zero_over_dp) zero_ = zero_over_dp(mesh_->comm("dp").dup());
}

TensorParallel::~TensorParallel() = default;

std::string TensorParallel::name() const { return zero_ ? "tensor_parallel+" + zero_->name() : "tensor_parallel"; }

void TensorParallel::prepare_model(nn::Module& model) {
  for (const Prepared& p : models_)
    if (p.model == &model) throw Error("Accelerator::prepare: this model was prepared already");
  auto* splittable = dynamic_cast<nn::parallel::TensorParallelModel*>(&model);
  if (!splittable)
    throw Error(fmt::format("TensorParallel: a {} cannot split itself across a tensor-parallel group; tp_size {} "
                            "needs a model that implements nn::parallel::TensorParallelModel (nn::GPT does)",
                            model.type_name(), mesh_->size("tp")));
  if (splittable->tensor_parallel_group())
    throw Error("TensorParallel: the model is split already; give prepare the whole model");
  model.to(env_.device());
  // The split cuts rank 0's full model, so that every group holds the same model. Parameters built
  // under DeferredInit are not broadcast: the ranks' recipes must agree, and the split makes each
  // part a meta tensor read from its full one's recipe, which this rank then materialises (under
  // ZeRO 3, only its slices of it), so no rank ever holds a full split tensor.
  check_deferred_init_agrees(model.named_parameters(), *env_.comm(), name());
  auto comm_for = [this](const Tensor& t) -> Communicator& { return env_.comm_for(t); };
  broadcast_from_rank0(materialised_entries(model.named_parameters()), comm_for, "tensor parallel");
  broadcast_from_rank0(model.named_buffers(), comm_for, "tensor parallel");
  splittable->parallelize(tp());
  if (!zero_ || !zero_->materializes_parameter_shards()) nn::materialize(model);
  Prepared prepared{&model, nn::parallel::tensor_splits(model), nullptr};
  nn::StateDict trained;
  for (const auto& [name, p] : model.named_parameters()) {
    if (const auto it = prepared.splits.find(name); it != prepared.splits.end()) split_params_.emplace_back(p, it->second);
    if (p.requires_grad()) trained.emplace_back(name, p);
  }
  // Each dp replica's grads of its own parts (and of the replicated parameters) averaged over dp, or
  // under ZeRO each dp rank's slice of them.
  if (zero_) zero_->prepare_model(model);
  else if (mesh_->size("dp") > 1) prepared.reducer = Reducer::attach(trained, mesh_->comm("dp").dup(), options_);
  models_.push_back(std::move(prepared));
}

void TensorParallel::prepare_optimizer(optim::Optimizer& optimizer) {
  if (zero_) zero_->prepare_optimizer(optimizer);
}

DataShard TensorParallel::data_shard() const { return {mesh_->coordinate("dp"), mesh_->size("dp")}; }

void TensorParallel::before_backward(bool sync) {
  if (zero_) zero_->before_backward(sync);
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->prepare_for_backward(sync);
}

void TensorParallel::after_backward() {
  if (zero_) zero_->after_backward();
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->finalize();
}

void TensorParallel::backward_failed() {
  if (zero_) zero_->backward_failed();
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->disarm();
}

std::vector<Tensor> TensorParallel::local_grads(const std::vector<Tensor>& params) const {
  return zero_ ? zero_->local_grads(params) : Strategy::local_grads(params);
}

const optim::Optimizer& TensorParallel::updating_optimizer(const optim::Optimizer& optimizer) const {
  return zero_ ? zero_->updating_optimizer(optimizer) : optimizer;
}

void TensorParallel::optimizer_step(optim::Optimizer& optimizer) {
  if (zero_) zero_->optimizer_step(optimizer);
  else Strategy::optimizer_step(optimizer);
}

void TensorParallel::zero_grad(optim::Optimizer& optimizer, bool set_to_none) {
  if (zero_) zero_->zero_grad(optimizer, set_to_none);
  else Strategy::zero_grad(optimizer, set_to_none);
}

const nn::parallel::TensorSplit* TensorParallel::split_of(const Tensor& param) const {
  for (const auto& [p, split] : split_params_)
    if (p.is_same(param)) return &split;
  return nullptr;
}

double TensorParallel::grad_norm(const std::vector<Tensor>& params, double norm_type) const {
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  const ReduceOp op = inf ? ReduceOp::max : ReduceOp::sum;
  std::vector<Tensor> split, replicated;
  if (zero_) {
    for (const auto& [p, run] : zero_->local_grad_runs(params)) (split_of(p) ? split : replicated).push_back(run);
  } else {
    for (const Tensor& p : params)
      if (p.defined() && p.grad().defined()) (split_of(p) ? split : replicated).push_back(p.grad());
  }
  double split_power = norm_power(split, norm_type), whole = norm_power(replicated, norm_type);
  // Under ZeRO each dp rank holds a slice of the averaged grads: the slices add up across dp first
  // (across a HYBRID_SHARD shard group: its replicas hold the same slices). Without it the dp
  // replicas hold the same averaged grads: nothing to add there.
  if (zero_) {
    Tensor both = from_vector(std::vector<double>{split_power, whole}, tp().device());
    zero_->reduce_over_slices(both, op, "tensor parallel gradient norm over the zero slices");
    const std::vector<double> summed = both.to_vector<double>();
    split_power = summed[0];
    whole = summed[1];
  }
  // The parts of a split parameter add up across the group; a replicated one is the same on every
  // rank of it, so it counts once.
  Tensor parts = scalar_tensor(split_power, DType::f64, tp().device());
  tp().all_reduce(parts, op, "tensor parallel gradient norm");
  const double total = inf ? std::max(parts.item(), whole) : parts.item() + whole;
  return inf ? total : std::pow(total, 1.0 / norm_type);
}

const TensorParallel::Prepared& TensorParallel::prepared(const nn::Module& model, const char* who) const {
  for (const Prepared& p : models_)
    if (p.model == &model) return p;
  throw Error(fmt::format("TensorParallel::{}: this {} was not prepared", who, model.type_name()));
}

Tensor TensorParallel::join(const Tensor& part, const nn::parallel::TensorSplit& split) const {
  NoGradGuard no_grad;
  const Tensor in = nograd::contiguous(part);
  Shape stacked_shape{tp().size()};
  stacked_shape.insert(stacked_shape.end(), in.shape().begin(), in.shape().end());
  Tensor stacked = empty(stacked_shape, in.dtype(), in.device());
  tp().all_gather(in, stacked, "tensor parallel state gather");
  std::vector<Tensor> parts;
  for (int r = 0; r < tp().size(); ++r) parts.push_back(nograd::select(stacked, 0, r));
  return nn::parallel::join_parts(parts, split);
}

nn::StateDict TensorParallel::local_model_state(const nn::Module& model) const {
  return zero_ ? zero_->model_state_dict(model) : model.state_dict();
}

optim::StateDict TensorParallel::local_optimizer_state(const optim::Optimizer& optimizer) const {
  return zero_ ? zero_->optimizer_state_dict(optimizer) : optimizer.state_dict();
}

nn::StateDict TensorParallel::model_state_dict(const nn::Module& model) const {
  const Prepared& p = prepared(model, "model_state_dict");
  nn::StateDict state;
  for (const auto& [name, t] : local_model_state(model)) {
    const auto it = p.splits.find(name);
    state.emplace_back(name, it == p.splits.end() ? t : join(t, it->second));
  }
  return state;
}

nn::LoadResult TensorParallel::load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) {
  return load_model_state(model, DictStateReader(state), strict);
}

nn::LoadResult TensorParallel::load_model_state(nn::Module& model, const StateReader& state, bool strict) {
  const SplitFor split_for = model_split_for(model, "load_model_state");
  std::map<std::string, Shape> live;
  for (const auto& [name, t] : model.state_dict()) live.emplace(name, t.shape());
  const TensorParallelPartReader parts(
      state,
      [&](const StateEntry& e) -> std::optional<TensorParallelPartReader::PartOf> {
        const nn::parallel::TensorSplit* split = split_for(e.name, e.shape);
        const auto mine = live.find(e.name);
        if (!split || mine == live.end()) return std::nullopt;
        return TensorParallelPartReader::PartOf{*split, mine->second};
      },
      tp().rank(), "load_model_state");
  return zero_ ? zero_->load_model_state(model, parts, strict) : model.load_state_dict(parts.read_all(), strict);
}

optim::StateDict TensorParallel::optimizer_state_dict(const optim::Optimizer& optimizer) const {
  const SplitFor split_for = optimizer_split_for(optimizer);
  optim::StateDict state;
  for (const auto& [key, t] : local_optimizer_state(optimizer)) {
    const nn::parallel::TensorSplit* split = split_for(key, t.shape());
    state.emplace_back(key, split ? join(t, *split) : t);
  }
  return state;
}

void TensorParallel::load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) {
  load_optimizer_state(optimizer, DictStateReader(state));
}

void TensorParallel::load_optimizer_state(optim::Optimizer& optimizer, const StateReader& state) {
  const SplitFor split_for = optimizer_split_for(optimizer);
  const TensorParallelPartReader parts(
      state,
      [&](const StateEntry& e) -> std::optional<TensorParallelPartReader::PartOf> {
        const nn::parallel::TensorSplit* split = split_for(e.name, e.shape);
        if (!split) return std::nullopt;
        return TensorParallelPartReader::PartOf{*split, slot_param(optimizer, e.name, e.shape)->shape()};
      },
      tp().rank(), "load_optimizer_state");
  if (zero_) zero_->load_optimizer_state(optimizer, parts);
  else optimizer.load_state_dict(parts.read_all());
}

TensorParallel::SplitFor TensorParallel::model_split_for(const nn::Module& model, const char* who) const {
  const Prepared& p = prepared(model, who);
  return [&p](const std::string& name, const Shape&) -> const nn::parallel::TensorSplit* {
    const auto it = p.splits.find(name);
    return it == p.splits.end() ? nullptr : &it->second;
  };
}

// A count (Adam's step) is 0-d; a moment has the parameter's shape, split as the parameter is.
TensorParallel::SplitFor TensorParallel::optimizer_split_for(const optim::Optimizer& optimizer) const {
  return [this, &optimizer](const std::string& key, const Shape& shape) -> const nn::parallel::TensorSplit* {
    const Tensor* param = slot_param(optimizer, key, shape);
    return param ? split_of(*param) : nullptr;
  };
}

StateShard TensorParallel::shard_of(const nn::StateDict& local, const SplitFor& split_for) const {
  StateShard shard{.local = local, .places = {}, .part = tp().rank(), .parts = tp().size(),
                   .writer = mesh_->coordinate("dp") == 0, .written_elsewhere = {}};
  for (const auto& [key, t] : local) {
    const nn::parallel::TensorSplit* split = split_for(key, t.shape());
    shard.places.push_back(split ? ShardPlace(*split) : ShardPlace());
  }
  return shard;
}

StateShard TensorParallel::part_runs_of(StateShard zero, const SplitFor& split_for) const {
  NoGradGuard no_grad;
  StateShard out{.local = {}, .places = {}, .part = tp().rank() * zero.parts + zero.part,
                 .parts = tp().size() * zero.parts, .writer = zero.writer, .written_elsewhere = {}};
  auto add = [&out](const std::string& key, Tensor t, ShardPlace place, bool written_elsewhere = false) {
    out.local.emplace_back(key, std::move(t));
    out.places.push_back(std::move(place));
    out.written_elsewhere.push_back(written_elsewhere);
  };
  for (size_t i = 0; i < zero.local.size(); ++i) {
    const auto& [key, t] = zero.local[i];
    const auto* run = std::get_if<ElementRun>(&zero.places[i]);
    const nn::parallel::TensorSplit* split = run ? split_for(key, run->full_shape) : nullptr;
    if (!split) {  // whole, or a run of a replicated tensor
      add(key, t, zero.places[i], run && tp().rank() != 0);
      continue;
    }
    // One run of the part, its padding at either end left out; none of it: the name only.
    const std::vector<nn::parallel::RunInFull> runs =
        nn::parallel::runs_in_full(run->full_shape, *split, tp().rank(), run->offset, t.numel());
    const int64_t first = runs.empty() ? 0 : runs.front().part_offset;
    const int64_t count = runs.empty() ? 0 : runs.back().part_offset + runs.back().count - first;
    add(key, nograd::narrow(t, 0, first, count), PartRun{*split, tp().rank(), run->full_shape, run->offset + first});
  }
  return out;
}

std::optional<StateShard> TensorParallel::model_state_shard(const nn::Module& model) const {
  const SplitFor by_name = model_split_for(model, "model_state_shard");
  if (zero_) return part_runs_of(*zero_->model_state_shard(model), by_name);
  return shard_of(local_model_state(model), by_name);
}

std::optional<StateShard> TensorParallel::optimizer_state_shard(const optim::Optimizer& optimizer) const {
  const SplitFor by_key = optimizer_split_for(optimizer);
  if (zero_) return part_runs_of(*zero_->optimizer_state_shard(optimizer), by_key);
  return shard_of(local_optimizer_state(optimizer), by_key);
}

}  // namespace accel
