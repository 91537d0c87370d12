// make_strategy: the reducer's options from the settings, then the strategy.
#include "runtime/strategy/make_strategy.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "runtime/strategy/data_parallel.h"
#include "runtime/strategy/single_device.h"
#include "runtime/strategy/tensor_parallel.h"
#include "runtime/strategy/zero_hybrid_shard.h"
#include "runtime/strategy/zero_stage12.h"
#include "runtime/strategy/zero_stage3.h"

namespace accel {

std::unique_ptr<Strategy> make_strategy(const Environment& env, const EffectiveSettings& settings,
                                        const PrecisionPolicy& policy) {
  const int tp_size = settings.tp_size.value;
  if (env.world_size() % tp_size != 0)
    throw Error(fmt::format("Accelerator: tp_size {} ({}) does not divide the world size {}", tp_size,
                            settings.tp_size.source, env.world_size()));
  int hybrid_shard_size = settings.hybrid_shard_size.value;
  const std::string& hybrid_source = settings.hybrid_shard_size.source;
  if (settings.hybrid_shard) check_hybrid_shard_size(hybrid_shard_size, hybrid_source, env.world_size(), tp_size);
  if (!env.comm()) return std::make_unique<SingleDevice>(env.device());
  // Not given: a shard group is a node's dp ranks (under TP each dp group sees only its own ranks),
  // resolved over the world so that every rank refuses alike.
  if (settings.hybrid_shard && hybrid_shard_size == 0)
    hybrid_shard_size = node_shard_size(env.grads_comm(), env.process(), hybrid_source, tp_size);
  ReducerOptions options;
  const double cap_mb = settings.bucket_cap_mb.value;
  options.bucket_cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(cap_mb * 1024 * 1024));
  options.first_bucket_cap_bytes = std::min<int64_t>(int64_t{1} << 20, options.bucket_cap_bytes);
  options.comm_dtype = policy.grad_comm;
  const int stage = settings.zero_stage.value;
  // bf16 and fp16 under ZeRO: 16-bit parameters and grads, f32 masters only as each rank's slices
  // (docs/zero.md). fp8 keeps its masters whole: its FP8 Linears quantise the f32 weights themselves.
  const MixedPrecision mixed = settings.mixed_precision.value;
  const DType masters = mixed == MixedPrecision::bf16 || mixed == MixedPrecision::fp16 ? policy.compute : DType::f32;
  // A ZeRO stage over comm: the world's data-parallel ranks, or a tensor-parallel model's dp ranks.
  // HYBRID_SHARD over comm: a {dp_replicate, dp_shard} mesh of its ranks.
  auto zero_over = [&](std::shared_ptr<Communicator> comm) -> std::unique_ptr<ZeroStrategy> {
    std::unique_ptr<ZeroStrategy> zero;
    if (settings.hybrid_shard)
      zero = make_hybrid_shard(env.device(), make_hybrid_mesh(*comm, env.process(), hybrid_shard_size, hybrid_source),
                               policy.grad_comm, settings.auto_wrap.value, settings.reshard_after_forward.value);
    else if (stage == 1 || stage == 2)
      zero = std::make_unique<ZeroStage12>(stage, env.device(), std::move(comm), policy.grad_comm,
                                           options.bucket_cap_bytes);
    else
      zero = std::make_unique<ZeroStage3>(env.device(), std::move(comm), policy.grad_comm, settings.auto_wrap.value,
                                          settings.reshard_after_forward.value);
    zero->shard_masters_in(masters);
    return zero;
  };
  if (tp_size > 1)
    return std::make_unique<TensorParallel>(env, tp_size, settings.dp_size, options,
                                            stage == 0 ? TensorParallel::ZeroOverDp{} : TensorParallel::ZeroOverDp(zero_over));
  if (stage == 0) return std::make_unique<DataParallel>(env, options);
  return zero_over(env.grads_comm().dup());  // on a communicator of its own
}

}  // namespace accel
