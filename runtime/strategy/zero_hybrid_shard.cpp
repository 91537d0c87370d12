// HybridShard: the mesh (shard size from the setting or the node), the broadcast over both dims, the
// all-reduce of the shard grads across the replicas, and checkpoint shards written by replica 0.
#include "runtime/strategy/zero_hybrid_shard.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "runtime/strategy/deferred_init_agreement.h"
#include "runtime/strategy/grad_average.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"

namespace accel {

HybridShard::HybridShard(Device device, std::shared_ptr<Communicator> shard, std::shared_ptr<Communicator> replicate,
                         DType comm_dtype, AutoWrapPolicy auto_wrap, bool reshard_after_forward)
    : ZeroStage3(device, shard, comm_dtype, std::move(auto_wrap), reshard_after_forward),
      shard_(std::move(shard)),
      replicate_(std::move(replicate)) {
  if (!replicate_) throw Error("HybridShard: got a null replicate communicator");
}

std::string HybridShard::name() const {
  return fmt::format("hybrid_shard (dp_replicate={} x dp_shard={})", replicate_->size(), shard_->size());
}

DataShard HybridShard::data_shard() const {
  return {replicate_->rank() * shard_->size() + shard_->rank(), replicate_->size() * shard_->size()};
}

void HybridShard::broadcast_from_main(const nn::StateDict& entries) const {
  broadcast_from_rank0(entries, [this](const Tensor&) -> Communicator& { return *replicate_; }, "hybrid_shard replicas");
  ZeroStage3::broadcast_from_main(entries);
}

void HybridShard::check_deferred_init(const nn::StateDict& entries) const {
  check_deferred_init_agrees(entries, *replicate_, name() + " replicas");
  ZeroStage3::check_deferred_init(entries);
}

void HybridShard::max_over_all_ranks(Tensor& flags) const {
  ZeroStage3::max_over_all_ranks(flags);
  if (replicate_->size() > 1) replicate_->all_reduce(flags, ReduceOp::max, "hybrid_shard parameters with a grad");
}

void HybridShard::before_backward(bool sync) {
  ZeroStage3::before_backward(sync);
  sync_ = sync;
  last_reduced_.reset();
  started_.assign(units_.size(), false);
}

void HybridShard::after_reduce_started(size_t u) {
  if (!averages_replicas()) return;
  // One unit behind: its reduce-scatter has had the time of the next unit's backward to finish.
  if (last_reduced_) {
    finish_reduce_scatter(*units_[*last_reduced_], /*add=*/true);
    start_replica_all_reduce(*last_reduced_);
  }
  last_reduced_ = u;
}

void HybridShard::after_backward() {
  ZeroStage3::after_backward();  // every reduce-scatter finished, the shard grads whole
  if (!averages_replicas()) return;
  for (size_t u = 0; u < units_.size(); ++u)
    if (!started_[u]) start_replica_all_reduce(u);
  finish_replica_all_reduces();
  refresh_master_grads();  // from the replicas' average
}

void HybridShard::backward_failed() {
  ZeroStage3::backward_failed();
  try {
    finish_replica_all_reduces();
  } catch (const Error&) {
    // A failed collective of a backward being abandoned: the error was or will be reported there.
  }
  flights_.clear();
}

void HybridShard::start_replica_all_reduce(size_t u) {
  started_[u] = true;
  const Tensor& grad = units_[u]->shard_grad;
  if (!grad.defined()) return;
  NoGradGuard no_grad;
  // Each unit's shard grad holds the shard group's average of everything since zero_grad; the
  // replicas agree on what earlier syncs averaged, so averaging the whole again adds only this
  // window's average across the replicas (avg(S + g_i) = S + avg(g_i)).
  Tensor wire = wire_of(grad);
  if (wire.impl() == grad.impl()) wire = nograd::clone(grad);
  Work work = replicate_->all_reduce_async(
      wire, predivide_for_average(wire, replicate_->size()),
      CallSite::gradient_sync(fmt::format("hybrid_shard all-reduce of {}", units_[u]->flat->name())));
  flights_.push_back({std::move(work), wire, grad});
  log_event({ZeroEvent::Kind::replica_all_reduce, u});
}

void HybridShard::finish_replica_all_reduces() {
  NoGradGuard no_grad;
  std::exception_ptr failed;
  for (InFlight& f : flights_) {
    try {
      f.work.wait();
      nograd::copy_(f.grad, f.wire);
    } catch (...) {
      if (!failed) failed = std::current_exception();  // the rest are still waited for
    }
  }
  flights_.clear();
  if (failed) std::rethrow_exception(failed);
}

std::optional<StateShard> HybridShard::model_state_shard(const nn::Module& model) const {
  std::optional<StateShard> shard = ZeroStage3::model_state_shard(model);
  if (shard) shard->writer = replicate_->rank() == 0;
  return shard;
}

std::optional<StateShard> HybridShard::optimizer_state_shard(const optim::Optimizer& optimizer) const {
  std::optional<StateShard> shard = ZeroStage3::optimizer_state_shard(optimizer);
  if (shard) shard->writer = replicate_->rank() == 0;
  return shard;
}

namespace {

// Whether this rank sits where a node-per-shard-group mesh puts it: nodes of equal size, numbered
// node by node. Agreed over comm, so that every rank throws or none does.
bool ranks_laid_out_by_node(Communicator& comm, const ProcessState& p) {
  const int local = p.local_world_size;
  const bool here = local >= 1 && p.world_size % local == 0 && p.rank == p.node_rank * local + p.local_rank;
  Tensor flag = scalar_tensor(here ? 1.0 : 0.0, DType::f64, comm.device());
  comm.all_reduce(flag, ReduceOp::min, "hybrid_shard mesh check");
  return flag.item() == 1.0;
}

}  // namespace

void check_hybrid_shard_size(int shard_size, const std::string& source, int world_size, int tp_size) {
  const int dp = world_size / tp_size;
  if (shard_size >= 0 && (shard_size == 0 || dp % shard_size == 0)) return;
  if (tp_size == 1)
    throw Error(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD with hybrid_shard_size {} ({}): it does "
                            "not divide the world size {}; expected ranks per shard group such that world size = "
                            "replicas x hybrid_shard_size",
                            shard_size, source, world_size));
  throw Error(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD with hybrid_shard_size {} ({}): it does not "
                          "divide the {} data-parallel ranks (world size {} over tp_size {}); expected dp ranks per "
                          "shard group such that dp = replicas x hybrid_shard_size",
                          shard_size, source, dp, world_size, tp_size));
}

int node_shard_size(Communicator& world, const ProcessState& process, const std::string& source, int tp_size) {
  const int dp = world.size() / tp_size;
  const std::string give = fmt::format("give hybrid_shard_size dividing {}", dp);
  if (process.num_nodes <= 1)
    throw Error(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not "
                            "given ({}), so a shard group is one node, but all {} ranks run on one node and there "
                            "is nothing to replicate across; give hybrid_shard_size (FSDPPlugin, "
                            "ACCEL_FSDP_HYBRID_SHARD_SIZE, the config file's fsdp_hybrid_shard_size or accel "
                            "launch --fsdp_hybrid_shard_size) dividing {}, or use FULL_SHARD",
                            source, world.size(), dp));
  if (!ranks_laid_out_by_node(world, process))
    throw Error(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not "
                            "given ({}), so a shard group is one node, but the {} ranks are not {} nodes of equal "
                            "size numbered node by node (rank {} is local rank {} of {} on node {}); {}",
                            source, world.size(), process.num_nodes, process.rank, process.local_rank,
                            process.local_world_size, process.node_rank, give));
  // Every rank has the same local_world_size now, so all of them agree here.
  if (process.local_world_size % tp_size != 0)
    throw Error(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not "
                            "given ({}), so a shard group is the data-parallel ranks of one node, but a node's {} "
                            "ranks do not hold whole tensor-parallel groups of tp_size {}; {}",
                            source, process.local_world_size, tp_size, give));
  return process.local_world_size / tp_size;
}

std::shared_ptr<DeviceMesh> make_hybrid_mesh(Communicator& comm, const ProcessState& process, int shard_size,
                                             const std::string& source) {
  const int world = comm.size();
  check_hybrid_shard_size(shard_size, source, world);
  if (shard_size == 0) shard_size = node_shard_size(comm, process, source, 1);
  return std::make_shared<DeviceMesh>(
      comm, std::vector<MeshDim>{{"dp_replicate", world / shard_size}, {"dp_shard", shard_size}});
}

std::unique_ptr<HybridShard> make_hybrid_shard(Device device, const std::shared_ptr<DeviceMesh>& mesh,
                                               DType comm_dtype, AutoWrapPolicy auto_wrap,
                                               bool reshard_after_forward) {
  // Aliasing shared_ptrs: each communicator keeps the whole mesh alive.
  std::shared_ptr<Communicator> shard(mesh, &mesh->comm("dp_shard"));
  std::shared_ptr<Communicator> replicate(mesh, &mesh->comm("dp_replicate"));
  return std::make_unique<HybridShard>(device, std::move(shard), std::move(replicate), comm_dtype,
                                       std::move(auto_wrap), reshard_after_forward);
}

}  // namespace accel
