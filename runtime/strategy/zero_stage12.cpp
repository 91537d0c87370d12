// ZeroStage12: the units as buckets, stage 1's in-place reduce-scatter after backward, stage 2's
// from the grad-ready hooks, and the all-gather of the updated slices.
#include "runtime/strategy/zero_stage12.h"

#include <fmt/format.h>

#include <unordered_set>

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"

namespace accel {

ZeroStage12::ZeroStage12(int stage, Device device, std::shared_ptr<Communicator> comm, DType comm_dtype,
                         int64_t bucket_cap_bytes)
    : ZeroStrategy(stage, device, std::move(comm), comm_dtype), bucket_cap_bytes_(bucket_cap_bytes) {
  if (stage != 1 && stage != 2) throw Error(fmt::format("ZeroStage12: stage must be 1 or 2, got {}", stage));
  if (bucket_cap_bytes <= 0) throw Error(fmt::format("ZeroStage12: bucket_cap_bytes must be > 0, got {}", bucket_cap_bytes));
}

ZeroStage12::~ZeroStage12() {
  for (HookHandle& hook : hooks_) hook.remove();
}

void ZeroStage12::prepare_model(nn::Module& model) {
  for (const auto& u : units_)
    if (u->model == &model) throw Error("Accelerator::prepare: this model was prepared already");
  model.to(device());
  // Buckets over the parameters in reverse order (backward makes the last ones' grads first); a
  // bucket closes before a parameter that would take it past the cap, or that has another dtype.
  nn::StateDict all = model.named_parameters(), bucket;
  std::unordered_set<const TensorImpl*> seen;  // tied weights: one tensor, one place
  int64_t bytes = 0;
  const size_t first_unit = units_.size();
  auto close = [&] {
    if (bucket.empty()) return;
    add_unit(model, fmt::format("bucket{}", units_.size() - first_unit), bucket);
    bucket.clear();
    bytes = 0;
  };
  for (size_t k = all.size(); k-- > 0;) {
    const Tensor& p = all[k].second;
    if (!seen.insert(p.impl()).second) continue;
    const bool other_dtype = !bucket.empty() && bucket.back().second.dtype() != p.dtype();
    if (other_dtype || (!bucket.empty() && bytes + static_cast<int64_t>(p.nbytes()) > bucket_cap_bytes_)) close();
    bucket.push_back(all[k]);
    bytes += static_cast<int64_t>(p.nbytes());
  }
  close();
  if (units_.size() == first_unit) throw Error("Accelerator::prepare: under ZeRO the model must have parameters");
  // Every rank starts from rank 0's values: one broadcast per unit, plus the buffers.
  for (size_t u = first_unit; u < units_.size(); ++u) broadcast_from_main({{units_[u]->flat->name(), units_[u]->flat->full()}});
  for (size_t u = first_unit; u < units_.size(); ++u) split_master(*units_[u], /*own_shard=*/false);
  broadcast_from_main(model.named_buffers());
  ready_.resize(units_.size());
  pending_.resize(units_.size());
  for (size_t u = first_unit; u < units_.size(); ++u) {
    ready_[u].assign(units_[u]->flat->params().size(), false);
    if (stage() != 2) continue;
    for (size_t j = 0; j < units_[u]->flat->params().size(); ++j)
      hooks_.push_back(units_[u]->flat->params()[j].add_grad_ready_hook([this, u, j](Tensor&) { on_grad_ready(u, j); }));
  }
}

void ZeroStage12::before_backward(bool sync) {
  if (in_backward_) backward_failed();  // the last backward threw before after_backward
  in_backward_ = true;
  sync_ = sync;
  next_launch_ = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    // Stage 1 lends flat grads, so its reduce-scatter averages them where they are.
    if (stage() == 1) {
      units_[u]->flat->lend_grads();
      carry_synced_slice(*units_[u]);
    }
    ready_[u].assign(ready_[u].size(), false);
    pending_[u] = static_cast<int64_t>(ready_[u].size());
  }
}

void ZeroStage12::on_grad_ready(size_t u, size_t j) {
  if (!in_backward_ || !sync_) return;
  if (ready_[u][j])
    throw Error(fmt::format("{}: the grad of '{}' became ready twice in one backward; each parameter may reach the "
                            "loss through one graph only",
                            name(), units_[u]->flat->param_names()[j]));
  ready_[u][j] = true;
  if (--pending_[u] == 0) launch_ready();
}

void ZeroStage12::launch_ready() {
  NoGradGuard no_grad;
  while (next_launch_ < units_.size() && pending_[next_launch_] == 0) {
    Unit& unit = *units_[next_launch_++];
    // The unit's grads into one flat buffer (a parameter without a grad counts as zeros), which the
    // reduce-scatter holds until it is done; the parameters' own grads are no longer needed.
    Tensor flat = zeros({unit.flat->padded_numel()}, comm_dtype(), unit.flat->device());  // in the wire's dtype
    for (size_t j = 0; j < unit.flat->params().size(); ++j) {
      const Tensor& p = unit.flat->params()[j];
      if (p.grad().defined()) nograd::copy_(unit.flat->param_view(flat, j), p.grad());
      p.set_grad(Tensor());
    }
    start_reduce_scatter(unit, flat);
  }
}

void ZeroStage12::after_backward() {
  if (!in_backward_) throw Error(fmt::format("{}: after_backward without before_backward", name()));
  in_backward_ = false;
  if (!sync_) return;  // an early micro-step: the grads stay local, nothing is sent
  if (stage() == 1) {
    // A wire wider than the grads is an f32 copy of a unit's: one unit at a time, so one is alive.
    for (auto& u : units_) {
      start_slice_reduce_scatter(*u);
      if (widens(*u)) finish_slice_reduce_scatter(*u);
    }
    for (auto& u : units_) finish_slice_reduce_scatter(*u);
    refresh_master_grads();
    return;
  }
  // Units whose last grad never came (a parameter this backward did not reach) go now, in order.
  for (int64_t& p : pending_) p = 0;
  launch_ready();
  for (auto& u : units_) finish_reduce_scatter(*u, /*add=*/true);
  refresh_master_grads();
}

void ZeroStage12::backward_failed() {
  in_backward_ = false;
  wait_all_quietly();
}

void ZeroStage12::after_shard_update(Unit& unit) {
  // In place: this rank's slice of full() is the shard the optimizer just updated (under sharded
  // masters its 16-bit rounding, so the gather sends 16-bit).
  comm().all_gather(unit.shard, unit.flat->full(), fmt::format("zero all-gather of {}", unit.flat->name()));
}

}  // namespace accel
