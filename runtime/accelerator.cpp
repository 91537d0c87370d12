// Accelerator: settings resolution, device and communicator choice, the preparation of models,
// optimizers and data loaders, backward with gradient sync and accumulation, and the collectives.
#include "runtime/accelerator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "accel_config.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "collective/ring_communicator.h"
#include "runtime/config_file.h"
#include "runtime/safetensors.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"
#if ACCEL_WITH_MPI
#include <mpi.h>

#include "collective/mpi_communicator.h"
#include "collective/mpi_environment.h"
#endif
#if ACCEL_WITH_NCCL
#include "collective/nccl_communicator.h"
#endif

namespace accel {

struct Accelerator::MixedPrecisionState {
  std::shared_ptr<Communicator> comm;                    // null with one process
  std::unique_ptr<WeightCopies> copies;                  // with fp16/bf16
  std::vector<std::weak_ptr<optim::Optimizer>> optimizers;  // the prepared ones
  bool unscaled = false;   // this step's grads were unscaled already (by clip_grad_norm)
  bool found_inf = false;  // ... and some rank's held inf/NaN
  bool last_step_skipped = false;
};

namespace {

#if ACCEL_WITH_MPI
// MPI for the whole program: started by the first Accelerator that needs it and finalised at exit
// (MPI cannot start twice in one process, so it must outlive any one Accelerator). If the program
// started MPI itself, this only looks on.
MpiEnvironment& program_mpi() {
  static MpiEnvironment environment;
  return environment;
}
#endif

}  // namespace

Accelerator::Accelerator(AcceleratorOptions options) {
  const EnvironmentVariables env = environment_variables();
  state_ = ProcessState::from_environment(env);
  settings_ = resolve_settings(options, env);
  accumulation_steps_ = std::stoi(settings_.gradient_accumulation_steps.value);
  even_batches_ = options.even_batches;
  split_batches_ = options.split_batches;
  const double cap_mb = std::stod(settings_.bucket_cap_mb.value);
  reducer_options_.bucket_cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(cap_mb * 1024 * 1024));
  reducer_options_.first_bucket_cap_bytes = std::min<int64_t>(int64_t{1} << 20, reducer_options_.bucket_cap_bytes);
  const Setting& mp = settings_.mixed_precision;
  try {
    policy_ = PrecisionPolicy::from_settings(mp.value, settings_.grad_comm_dtype.value);
  } catch (const Error& e) {
    throw Error(fmt::format("Accelerator: mixed_precision={} (from {}) and grad_comm_dtype={} (from {}) conflict: {}",
                            mp.value, mp.source, settings_.grad_comm_dtype.value, settings_.grad_comm_dtype.source,
                            e.what()));
  }
  if (options.loss_scaler && mp.value != "fp16")
    throw Error(fmt::format("Accelerator: loss_scaler options (from code) conflict with mixed_precision={} (from {}): "
                            "only fp16 uses a loss scaler; drop the loss_scaler options or use fp16",
                            mp.value, mp.source));
  if (mp.value == "fp16") scaler_ = std::make_unique<LossScaler>(options.loss_scaler.value_or(LossScalerOptions{}));
  reducer_options_.comm_dtype = policy_.grad_comm;
  const std::string& backend = settings_.backend.value;
  if (backend == "nccl" && !ACCEL_WITH_NCCL)
    throw Error(fmt::format("Accelerator: backend nccl (from {}) is not available: this build has no NCCL; use "
                            "auto, mpi or ring",
                            settings_.backend.source));
  const bool use_cpu = settings_.cpu.value == "true";
  const int gpus = use_cpu ? 0 : cuda_device_count();
  device_ = gpus > 0 ? Device::cuda(state_.local_rank % gpus) : Device::cpu();
  // Device tensors go over NCCL when asked for, or by default when every rank on the node has a GPU
  // of its own (NCCL refuses two ranks on one GPU; those share it through the mpi backend's staging).
  const bool use_nccl =
      backend == "nccl" || (backend == "auto" && ACCEL_WITH_NCCL && device_.is_cuda() && gpus >= state_.local_world_size &&
                            state_.world_size > 1);
  if (backend == "nccl" && !device_.is_cuda())
    throw Error(fmt::format("Accelerator: backend nccl (from {}) needs a GPU, but the device is cpu ({}); use auto, "
                            "mpi or ring",
                            settings_.backend.source, use_cpu ? "cpu=true" : "no CUDA device is visible"));

  // One process with backend nccl still builds its communicators, so a one-rank run takes the NCCL path.
  if (state_.world_size > 1 || use_nccl) {
#if ACCEL_WITH_MPI
    program_mpi();
    int mpi_rank = 0, mpi_size = 1;
    if (const int rc = MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank); rc != MPI_SUCCESS)
      throw Error("Accelerator: " + mpi_error_text("MPI_Comm_rank", rc));
    if (const int rc = MPI_Comm_size(MPI_COMM_WORLD, &mpi_size); rc != MPI_SUCCESS)
      throw Error("Accelerator: " + mpi_error_text("MPI_Comm_size", rc));
    if (mpi_size != state_.world_size || mpi_rank != state_.rank)
      throw Error(fmt::format("Accelerator: the {} variables say rank {} of {}, but MPI says rank {} of {}; start "
                              "the processes with mpirun or accel launch",
                              state_.launcher, state_.rank, state_.world_size, mpi_rank, mpi_size));
    auto mpi = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
    if (backend == "ring") comm_ = std::make_shared<RingCommunicator>(mpi);
    else comm_ = mpi;  // auto and mpi: the MPI library's own collectives; device tensors are staged
    backend_ = comm_->backend();
#if ACCEL_WITH_NCCL
    if (use_nccl) {
      device_comm_ = std::make_shared<NcclCommunicator>(device_, *mpi);
      backend_ = device_comm_->backend();
    }
#endif
#else
    throw Error(fmt::format("Accelerator: launched as rank {} of {} ({} variables), but this build has no MPI, so "
                            "it cannot communicate; rebuild with Open MPI (libopenmpi-dev) or start one process",
                            state_.rank, state_.world_size, state_.launcher));
#endif
  }
  amp_ = std::make_shared<MixedPrecisionState>();
  amp_->comm = comm_;
  if (policy_.is_mixed()) amp_->copies = std::make_unique<WeightCopies>(policy_.compute);
  if (options.print_settings && is_main_process()) {
    std::cout << fmt::format("accel: {} process(es), device {}, {}", state_.world_size, device_.str(),
                             settings_.describe())
              << std::endl;
    std::string scaler = "no loss scaler";
    if (scaler_) {
      const LossScalerOptions& o = scaler_->options();
      scaler = fmt::format("dynamic loss scale {} (x{} after {} clean steps, x{} on overflow)", o.init_scale,
                           o.growth_factor, o.growth_interval, o.backoff_factor);
    }
    std::cout << fmt::format("accel: precision policy: {}, {}", policy_.describe(), scaler) << std::endl;
  }
}

Accelerator::~Accelerator() = default;

AutocastGuard Accelerator::autocast() const { return AutocastGuard(policy_, amp_->copies.get()); }

bool Accelerator::optimizer_step_was_skipped() const { return amp_->last_step_skipped; }

void Accelerator::weights_changed() {
  if (amp_->copies) amp_->copies->mark_stale();
}

void Accelerator::unscale_grads(const std::vector<Tensor>& extra) {
  MixedPrecisionState& amp = *amp_;
  if (!scaler_ || amp.unscaled) return;
  std::vector<Tensor> grads;
  std::set<const TensorImpl*> seen;
  auto take = [&](const Tensor& p) {
    if (!p.defined() || !p.grad().defined()) return;
    const Tensor g = p.grad();
    if (seen.insert(g.impl()).second) grads.push_back(g);
  };
  for (const auto& weak : amp.optimizers)
    if (auto opt = weak.lock())
      for (const Tensor& p : opt->params()) take(p);
  for (const Tensor& p : extra) take(p);
  NoGradGuard no_grad;
  bool found_inf = scaler_->unscale(grads);
  if (comm_) {
    // One all-reduce of a flag: if any rank overflowed, every rank skips this step.
    Tensor flag = scalar_tensor(found_inf ? 1.0 : 0.0, DType::f32);
    flag = nograd::reshape(flag, {1});
    comm_->all_reduce(flag, ReduceOp::max);
    found_inf = flag.item() != 0.0;
  }
  amp.found_inf = found_inf;
  amp.unscaled = true;
}

Communicator& Accelerator::comm_for(const Tensor& t) const {
  return device_comm_ && t.device() == device_ ? *device_comm_ : *comm_;
}

Accelerator::Scope::~Scope() {
  if (!on_exit_) return;
  try {
    on_exit_();
  } catch (const std::exception& e) {
    // A destructor cannot throw; a failing barrier means the job is already broken.
    std::cerr << "accel: leaving a scope failed: " << e.what() << std::endl;
  }
}

void Accelerator::prepare_model(nn::Module& model) {
  model.to(device_);
  if (amp_->copies) {
    for (const Tensor& p : model.parameters()) amp_->copies->add(p);
    amp_->copies->mark_stale();
  }
  if (!comm_) return;
  for (const auto& [m, r] : reducers_)
    if (m == &model) throw Error("Accelerator::prepare: this model was prepared already");
  // Every rank starts from rank 0's weights, whatever it initialised itself.
  NoGradGuard no_grad;
  auto send_from_main = [&](const nn::StateDict& entries) {
    for (const auto& [name, t] : entries) {
      if (t.is_contiguous()) {
        comm_for(t).broadcast(t, 0);
      } else {
        Tensor staged = nograd::contiguous(t);
        comm_for(staged).broadcast(staged, 0);
        nograd::copy_(t, staged);
      }
    }
  };
  send_from_main(model.named_parameters());
  send_from_main(model.named_buffers());
  // The reducer's all-reduces get a communicator (and communication thread) of their own.
  Communicator& grads_comm = device_comm_ && device_.is_cuda() ? *device_comm_ : *comm_;
  reducers_.emplace_back(&model, Reducer::attach(model.named_parameters(), grads_comm.dup(), reducer_options_));
}

const Reducer* Accelerator::reducer(const nn::Module& model) const {
  for (const auto& [m, r] : reducers_)
    if (m == &model) return r.get();
  return nullptr;
}

void Accelerator::prepare_optimizer(const std::shared_ptr<optim::Optimizer>& prepared) {
  optim::Optimizer& optimizer = *prepared;
  if (scaler_)
    for (const auto& weak : amp_->optimizers)
      if (!weak.expired())
        throw Error("Accelerator::prepare: with mixed_precision=fp16 one optimizer can be prepared (the loss scaler "
                    "unscales, checks and updates once per step); this is a second one");
  amp_->optimizers.push_back(prepared);
  for (const Tensor& p : optimizer.params())
    if (p.device() != device_)
      throw Error(fmt::format("Accelerator::prepare: an optimizer parameter is on {} but the device is {}; prepare "
                              "the model together with its optimizer",
                              p.device().str(), device_.str()));
  // The gates hold the state weakly: an optimizer that outlives the Accelerator works ungated.
  std::weak_ptr<GradientState> state = gradient_state_;
  std::weak_ptr<MixedPrecisionState> amp_state = amp_;
  optimizer.set_gates(
      [this, state, amp_state] {
        auto s = state.lock();
        if (!s) return true;
        if (!s->sync_gradients) return false;
        s->grads_pending = false;  // the window's grads are used up by this step
        auto amp = amp_state.lock();
        if (!amp) return true;
        // The Accelerator is alive while amp_state is: it owns the only strong reference.
        amp->last_step_skipped = false;
        if (scaler_) {
          unscale_grads({});
          const bool found_inf = amp->found_inf;
          amp->unscaled = false;
          amp->found_inf = false;
          scaler_->update(found_inf);
          if (found_inf) {
            amp->last_step_skipped = true;
            return false;  // every rank skips: they agreed on found_inf
          }
        }
        // The masters are about to change: round the low-precision copies again on their next use.
        if (amp->copies) amp->copies->mark_stale();
        return true;
      },
      [state] {
        auto s = state.lock();
        return !s || !s->grads_pending;
      });
}

DataLoader Accelerator::prepare_data_loader(const DataLoader& loader) {
  DataLoader prepared = loader;
  prepared.shard({.rank = state_.rank,
                  .world_size = state_.world_size,
                  .even_batches = even_batches_,
                  .split_batches = split_batches_});
  prepared.set_device(device_);
  prepared.set_gradient_state(gradient_state_);
  return prepared;
}

void Accelerator::backward(const Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1)
    throw Error(fmt::format("Accelerator::backward: expected a one-element loss, got {}", loss.str()));
  const bool accumulating = in_accumulate_ && no_sync_depth_ == 0;
  const bool sync = no_sync_depth_ == 0 && (!in_accumulate_ || gradient_state_->sync_gradients);
  Tensor scaled = accumulating && window_ > 1 ? loss / static_cast<double>(window_) : loss;
  // fp16: scale the loss (in f32, so the scale itself cannot overflow) so that small grads survive
  // in f16; the step unscales them.
  if (scaler_) scaled = to(scaled, DType::f32) * scaler_->scale();
  for (auto& [m, r] : reducers_) r->prepare_for_backward(sync);
  try {
    accel::backward(scaled);
  } catch (...) {
    for (auto& [m, r] : reducers_) r->disarm();
    throw;
  }
  if (accumulating && !gradient_state_->sync_gradients) gradient_state_->grads_pending = true;
  for (auto& [m, r] : reducers_) r->finalize();
}

Accelerator::Scope Accelerator::accumulate() {
  if (in_accumulate_) throw Error("Accelerator::accumulate: already inside an accumulate() scope");
  const int64_t k = accumulation_steps_;
  GradientState& g = *gradient_state_;
  bool sync = false;
  if (g.batches != batches_seen_ && g.step >= 0) {
    // Follow the prepared loader: windows are [0, k), [k, 2k), ... of its epoch, the last one cut
    // short by the end of the data.
    batches_seen_ = g.batches;
    const int64_t start = g.step - g.step % k;
    window_ = std::min(k, g.steps_per_epoch - start);
    sync = g.step % k == k - 1 || g.step == g.steps_per_epoch - 1;
    micro_step_ = 0;
  } else {
    micro_step_ = micro_step_ % k + 1;
    window_ = k;
    sync = micro_step_ == k;
  }
  g.sync_gradients = sync;
  in_accumulate_ = true;
  return Scope([this] { in_accumulate_ = false; });
}

Accelerator::Scope Accelerator::no_sync() {
  ++no_sync_depth_;
  return Scope([this] { --no_sync_depth_; });
}

double Accelerator::clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  if (!(max_norm >= 0 && std::isfinite(max_norm)))
    throw Error(fmt::format("Accelerator::clip_grad_norm: max_norm must be finite and >= 0, got {}", max_norm));
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  if (!inf && !(norm_type > 0 && std::isfinite(norm_type)))
    throw Error(fmt::format("Accelerator::clip_grad_norm: norm_type must be > 0 or inf, got {}", norm_type));
  if (scaler_ && !gradient_state_->sync_gradients)
    throw Error("Accelerator::clip_grad_norm: with mixed_precision=fp16, clip on the micro-step that updates "
                "(sync_gradients() true): before it the accumulated grads are still multiplied by the loss scale");
  unscale_grads(params);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  // Accumulated in f64 so the norm of a large model does not lose digits.
  double total = 0;
  for (const Tensor& g : grads) {
    const Tensor a = nograd::abs(nograd::to_dtype(g, DType::f64));
    if (inf) total = std::max(total, nograd::max(a).item());
    else total += nograd::sum(norm_type == 2.0 ? nograd::mul(a, a) : nograd::pow(a, norm_type)).item();
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0)
    for (const Tensor& g : grads) nograd::mul_(g, coefficient);
  return total;
}

double Accelerator::clip_grad_norm(const nn::Module& model, double max_norm, double norm_type) {
  return clip_grad_norm(model.parameters(), max_norm, norm_type);
}

namespace {
constexpr int64_t kMaxInfoDims = 8;
constexpr int64_t kInfoWidth = 4 + kMaxInfoDims;  // defined, dtype, ndim, extra, dims...
}  // namespace

std::vector<Accelerator::TensorInfo> Accelerator::exchange_info(const char* op, const Tensor& t, int64_t extra) {
  std::vector<int64_t> mine(kInfoWidth, 0);
  if (t.defined()) {
    mine[0] = 1;
    mine[1] = static_cast<int64_t>(t.dtype());
    mine[2] = t.dim();
    for (int64_t d = 0; d < std::min(t.dim(), kMaxInfoDims); ++d) mine[4 + d] = t.size(d);
  }
  mine[3] = extra;
  const int n = comm_->size();
  Tensor all = empty({n, kInfoWidth}, DType::i64);
  comm_->all_gather(from_vector(mine), all);
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  std::vector<TensorInfo> infos(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int64_t* row = v.data() + static_cast<size_t>(r) * kInfoWidth;
    TensorInfo& info = infos[static_cast<size_t>(r)];
    info.defined = row[0] != 0;
    info.dtype = static_cast<DType>(row[1]);
    info.extra = row[3];
    if (!info.defined)
      throw Error(fmt::format("Accelerator::{}: rank {} passed an undefined tensor", op, r));
    if (row[2] > kMaxInfoDims)
      throw Error(fmt::format("Accelerator::{}: rank {} passed a tensor of {} dims; at most {} are supported", op, r,
                              row[2], kMaxInfoDims));
    info.shape.assign(row + 4, row + 4 + row[2]);
  }
  for (int r = 1; r < n; ++r)
    if (infos[static_cast<size_t>(r)].dtype != infos[0].dtype)
      throw Error(fmt::format("Accelerator::{}: rank 0 passed {} but rank {} passed {}", op,
                              dtype_name(infos[0].dtype), r, dtype_name(infos[static_cast<size_t>(r)].dtype)));
  return infos;
}

namespace {
std::string list_shapes(const std::vector<Shape>& shapes) {
  std::string out;
  for (size_t r = 0; r < shapes.size(); ++r) out += fmt::format("{}rank {} {}", r ? ", " : "", r, shape_str(shapes[r]));
  return out;
}

const char* reduction_name(int64_t code) { return code == 0 ? "sum" : code == 1 ? "mean" : "an unsupported reduction"; }
}  // namespace

std::string Accelerator::shapes_of(const std::vector<TensorInfo>& infos) {
  std::vector<Shape> shapes;
  for (const TensorInfo& info : infos) shapes.push_back(info.shape);
  return list_shapes(shapes);
}

Tensor Accelerator::gather_rows(const char* op, const Tensor& tensor, int64_t padding) {
  const Tensor rows = tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  const std::vector<TensorInfo> infos = exchange_info(op, rows, padding);
  const int n = comm_->size();
  std::vector<Shape> shapes;
  int64_t most = 0;
  for (const TensorInfo& info : infos) {
    shapes.push_back(info.shape);
    most = std::max(most, info.shape[0]);
  }
  for (int r = 0; r < n; ++r) {
    const Shape& s = shapes[static_cast<size_t>(r)];
    if (s.size() != shapes[0].size() || !std::equal(s.begin() + 1, s.end(), shapes[0].begin() + 1))
      throw Error(fmt::format("Accelerator::{}: the ranks' tensors differ beyond dim 0: {}", op, list_shapes(shapes)));
    if (infos[static_cast<size_t>(r)].extra > s[0])
      throw Error(fmt::format("Accelerator::{}: rank {} has {} rows but its last batch has {} padding rows; pass a "
                              "tensor whose dim 0 indexes the samples of the batch the prepared DataLoader produced "
                              "last",
                              op, r, s[0], infos[static_cast<size_t>(r)].extra));
  }
  // all_gather needs equal parts: pad every rank's rows to the largest count, then cut each part back.
  Shape part = shapes[0];
  part[0] = most;
  Tensor mine = zeros(part, rows.dtype(), rows.device());
  if (rows.size(0) > 0) nograd::copy_(nograd::narrow(mine, 0, 0, rows.size(0)), rows);
  Shape whole = part;
  whole[0] = most * n;
  Tensor all = empty(whole, rows.dtype(), rows.device());
  comm_for(mine).all_gather(mine, all);
  std::vector<Tensor> pieces;
  bool cut = false;
  for (int r = 0; r < n; ++r) {
    const TensorInfo& info = infos[static_cast<size_t>(r)];
    const int64_t keep = info.shape[0] - info.extra;
    cut |= keep != most;
    pieces.push_back(nograd::narrow(all, 0, r * most, keep));
  }
  return cut ? nograd::cat(pieces, 0) : all;
}

Tensor Accelerator::gather(const Tensor& tensor) {
  if (!comm_) return tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  return gather_rows("gather", tensor, 0);
}

Tensor Accelerator::gather_for_metrics(const Tensor& tensor) {
  // One process keeps its short last batch and never pads.
  if (!comm_) return tensor.defined() && tensor.dim() == 0 ? nograd::reshape(tensor, {1}) : tensor;
  return gather_rows("gather_for_metrics", tensor, gradient_state_->padding);
}

// The collectives below check their arguments after exchange_info, on every rank's values: a rank
// that finds a bad argument locally and throws would leave the others waiting in the exchange.

Tensor Accelerator::reduce(const Tensor& tensor, const std::string& reduction) {
  const int64_t code = reduction == "sum" ? 0 : reduction == "mean" ? 1 : -1;
  if (code < 0 && !comm_)
    throw Error(fmt::format("Accelerator::reduce: reduction '{}' is not supported; expected sum or mean", reduction));
  if (!comm_) return tensor;
  const std::vector<TensorInfo> infos = exchange_info("reduce", tensor, code);
  for (size_t r = 0; r < infos.size(); ++r) {
    if (code < 0)
      throw Error(fmt::format("Accelerator::reduce: reduction '{}' is not supported; expected sum or mean", reduction));
    if (infos[r].extra != code)
      throw Error(fmt::format("Accelerator::reduce: the ranks ask for different reductions (rank {} for {}, rank {} "
                              "for {})",
                              comm_->rank(), reduction, r, reduction_name(infos[r].extra)));
    if (infos[r].shape != infos[0].shape)
      throw Error(fmt::format("Accelerator::reduce: the ranks' shapes differ: {}", shapes_of(infos)));
  }
  Tensor out = nograd::clone(tensor);
  comm_for(out).all_reduce(out, code == 0 ? ReduceOp::sum : ReduceOp::avg);
  return out;
}

Tensor Accelerator::broadcast(const Tensor& tensor, int from) {
  const int n = state_.world_size;
  if (comm_) {
    const std::vector<TensorInfo> infos = exchange_info("broadcast", tensor, from);
    for (size_t r = 1; r < infos.size(); ++r)
      if (infos[r].extra != infos[0].extra)
        throw Error(fmt::format("Accelerator::broadcast: the ranks broadcast from different ranks (rank 0 from {}, "
                                "rank {} from {})",
                                infos[0].extra, r, infos[r].extra));
    for (const TensorInfo& info : infos)
      if (info.shape != infos[0].shape)
        throw Error(fmt::format("Accelerator::broadcast: the ranks' shapes differ: {}", shapes_of(infos)));
  }
  if (from < 0 || from >= n)
    throw Error(fmt::format("Accelerator::broadcast: from = {} is not a rank of {}", from, n));
  if (!comm_) return tensor;
  Tensor out = nograd::clone(tensor);
  comm_for(out).broadcast(out, from);
  return out;
}

Tensor Accelerator::pad_across_processes(const Tensor& tensor, int64_t dim, double pad_index, bool pad_first) {
  const char* op = "pad_across_processes";
  std::vector<TensorInfo> infos;
  if (comm_) {
    infos = exchange_info(op, tensor, dim);
  } else {
    if (!tensor.defined()) throw Error("Accelerator::pad_across_processes: rank 0 passed an undefined tensor");
    infos.push_back({true, tensor.dtype(), tensor.shape(), dim});
  }
  for (size_t r = 0; r < infos.size(); ++r) {
    if (infos[r].extra != dim)
      throw Error(fmt::format("Accelerator::pad_across_processes: the ranks pad different dims (rank {} dim {}, rank {} "
                              "dim {})",
                              state_.rank, dim, r, infos[r].extra));
    const int64_t ndim = static_cast<int64_t>(infos[r].shape.size());
    if (ndim == 0 || dim < -ndim || dim >= ndim)
      throw Error(fmt::format("Accelerator::pad_across_processes: dim {} is out of range for rank {}'s shape {}", dim,
                              r, shape_str(infos[r].shape)));
  }
  if (dim < 0) dim += tensor.dim();
  int64_t most = 0;
  for (const TensorInfo& info : infos) {
    bool same = info.shape.size() == infos[0].shape.size();
    for (size_t d = 0; same && d < info.shape.size(); ++d)
      same = static_cast<int64_t>(d) == dim || info.shape[d] == infos[0].shape[d];
    if (!same)
      throw Error(fmt::format("Accelerator::pad_across_processes: the ranks' shapes must agree except in dim {}: {}",
                              dim, shapes_of(infos)));
    most = std::max(most, info.shape[static_cast<size_t>(dim)]);
  }
  const int64_t size = tensor.size(dim);
  if (size == most) return tensor;
  Shape padded_shape = tensor.shape();
  padded_shape[static_cast<size_t>(dim)] = most;
  Tensor padded = full(padded_shape, pad_index, tensor.dtype(), tensor.device());
  nograd::copy_(nograd::narrow(padded, dim, pad_first ? most - size : 0, size), tensor);
  return padded;
}

void Accelerator::wait_for_everyone() {
  if (comm_) comm_->barrier();
}

Accelerator::Scope Accelerator::main_process_first() {
  if (!comm_) return Scope();
  if (!is_main_process()) comm_->barrier();  // wait for the main process to leave its scope
  return Scope([this] {
    if (is_main_process()) comm_->barrier();  // let the others in
  });
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir) {
  if (is_main_process()) {
    std::filesystem::create_directories(dir);
    save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), model.state_dict(),
                     {{"format", "pt"}});
  }
  wait_for_everyone();
}

}  // namespace accel
