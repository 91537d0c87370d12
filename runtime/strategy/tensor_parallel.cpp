// TensorParallel: the {dp, tp} mesh, the split of each prepared model, the reducer over dp, the norm
// over the whole model, and checkpoint state joined from (and cut into) the ranks' parts.
#include "runtime/strategy/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/parallel/split_layer.h"
#include "nn/parallel/tensor_parallel_model.h"
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

}  // namespace

TensorParallel::TensorParallel(const Environment& env, int tp_size, int dp_size, const ReducerOptions& options)
    : env_(env), options_(options) {
  const int dp = replicas(env, tp_size, dp_size);
  mesh_ = std::make_unique<DeviceMesh>(env.grads_comm(), std::vector<MeshDim>{{"dp", dp}, {"tp", tp_size}});
}

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
  // The split cuts rank 0's full model, so that every group holds the same model.
  auto comm_for = [this](const Tensor& t) -> Communicator& { return env_.comm_for(t); };
  broadcast_from_rank0(model.named_parameters(), comm_for, "tensor parallel");
  broadcast_from_rank0(model.named_buffers(), comm_for, "tensor parallel");
  splittable->parallelize(tp());
  Prepared prepared{&model, nn::parallel::tensor_splits(model), nullptr};
  nn::StateDict trained;
  for (const auto& [name, p] : model.named_parameters()) {
    if (const auto it = prepared.splits.find(name); it != prepared.splits.end()) split_params_.emplace_back(p, it->second);
    if (p.requires_grad()) trained.emplace_back(name, p);
  }
  // Each dp replica's grads of its own parts (and of the replicated parameters) averaged over dp.
  if (mesh_->size("dp") > 1) prepared.reducer = Reducer::attach(trained, mesh_->comm("dp").dup(), options_);
  models_.push_back(std::move(prepared));
}

DataShard TensorParallel::data_shard() const { return {mesh_->coordinate("dp"), mesh_->size("dp")}; }

void TensorParallel::before_backward(bool sync) {
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->prepare_for_backward(sync);
}

void TensorParallel::after_backward() {
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->finalize();
}

void TensorParallel::backward_failed() {
  for (Prepared& p : models_)
    if (p.reducer) p.reducer->disarm();
}

const nn::parallel::TensorSplit* TensorParallel::split_of(const Tensor& param) const {
  for (const auto& [p, split] : split_params_)
    if (p.is_same(param)) return &split;
  return nullptr;
}

double TensorParallel::grad_norm(const std::vector<Tensor>& params, double norm_type) const {
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  std::vector<Tensor> split, replicated;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) (split_of(p) ? split : replicated).push_back(p.grad());
  // The parts of a split parameter add up across the group; a replicated one is the same on every
  // rank of it, so it counts once. The dp replicas hold the same averaged grads: nothing to add there.
  Tensor parts = scalar_tensor(norm_power(split, norm_type), DType::f64, tp().device());
  tp().all_reduce(parts, inf ? ReduceOp::max : ReduceOp::sum, "tensor parallel gradient norm");
  const double whole = norm_power(replicated, norm_type);
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

Tensor TensorParallel::cut(const Tensor& full, const Tensor& part, const nn::parallel::TensorSplit& split,
                           const char* who, const std::string& name) const {
  Shape expected = part.shape();
  expected[static_cast<size_t>(split.dim)] = split.full_size;
  if (full.shape() != expected)
    throw Error(fmt::format("TensorParallel::{}: '{}' in the state is {}, but the model's full tensor is {}", who,
                            name, shape_str(full.shape()), shape_str(expected)));
  NoGradGuard no_grad;
  return nn::parallel::split_part(full, split, tp().rank(), tp().size());
}

nn::StateDict TensorParallel::model_state_dict(const nn::Module& model) const {
  const Prepared& p = prepared(model, "model_state_dict");
  nn::StateDict state;
  for (const auto& [name, t] : model.state_dict()) {
    const auto it = p.splits.find(name);
    state.emplace_back(name, it == p.splits.end() ? t : join(t, it->second));
  }
  return state;
}

nn::LoadResult TensorParallel::load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) {
  const Prepared& p = prepared(model, "load_model_state_dict");
  const nn::StateDict live = model.state_dict();
  nn::StateDict parts;
  for (const auto& [name, t] : state) {
    const auto it = p.splits.find(name);
    const auto mine = std::find_if(live.begin(), live.end(), [&](const auto& e) { return e.first == name; });
    if (it == p.splits.end() || mine == live.end()) parts.emplace_back(name, t);
    else parts.emplace_back(name, cut(t, mine->second, it->second, "load_model_state_dict", name));
  }
  return model.load_state_dict(parts, strict);
}

optim::StateDict TensorParallel::optimizer_state_dict(const optim::Optimizer& optimizer) const {
  optim::StateDict state;
  for (const auto& [key, t] : optimizer.state_dict()) {
    size_t index = 0;
    std::string slot;
    const bool per_param = optim::parse_state_key(key, index, slot) && index < optimizer.params().size();
    const nn::parallel::TensorSplit* split = per_param ? split_of(optimizer.params()[index]) : nullptr;
    // A count (Adam's step) is 0-d; a moment has the parameter's shape, split as the parameter is.
    state.emplace_back(key, split && t.dim() > 0 ? join(t, *split) : t);
  }
  return state;
}

void TensorParallel::load_optimizer_state_dict(optim::Optimizer& optimizer, const optim::StateDict& state) {
  optim::StateDict parts;
  for (const auto& [key, t] : state) {
    size_t index = 0;
    std::string slot;
    const bool per_param = optim::parse_state_key(key, index, slot) && index < optimizer.params().size();
    const nn::parallel::TensorSplit* split = per_param ? split_of(optimizer.params()[index]) : nullptr;
    if (!split || t.dim() == 0) parts.emplace_back(key, t);
    else parts.emplace_back(key, cut(t, optimizer.params()[index], *split, "load_optimizer_state_dict", key));
  }
  optimizer.load_state_dict(parts);
}

StateShard TensorParallel::shard_of(
    const nn::StateDict& local,
    const std::function<const nn::parallel::TensorSplit*(const std::string&, const Tensor&)>& split_for) const {
  StateShard shard{.local = local, .places = {}, .part = tp().rank(), .parts = tp().size(),
                   .writer = mesh_->coordinate("dp") == 0};
  for (const auto& [key, t] : local) {
    const nn::parallel::TensorSplit* split = split_for(key, t);
    shard.places.push_back(split ? ShardPlace(*split) : ShardPlace());
  }
  return shard;
}

std::optional<StateShard> TensorParallel::model_state_shard(const nn::Module& model) const {
  const Prepared& p = prepared(model, "model_state_shard");
  return shard_of(model.state_dict(), [&](const std::string& name, const Tensor&) {
    const auto it = p.splits.find(name);
    return it == p.splits.end() ? nullptr : &it->second;
  });
}

std::optional<StateShard> TensorParallel::optimizer_state_shard(const optim::Optimizer& optimizer) const {
  return shard_of(optimizer.state_dict(), [&](const std::string& key, const Tensor& t) {
    size_t index = 0;
    std::string slot;
    const bool per_param = optim::parse_state_key(key, index, slot) && index < optimizer.params().size();
    return per_param && t.dim() > 0 ? split_of(optimizer.params()[index]) : nullptr;
  });
}

}  // namespace accel
