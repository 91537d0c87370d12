// make_strategy: the reducer's options from the settings, then the strategy.
#include "runtime/strategy/make_strategy.h"

#include <algorithm>
#include <string>

#include "runtime/strategy/data_parallel.h"
#include "runtime/strategy/single_device.h"
#include "runtime/strategy/zero_stage12.h"
#include "runtime/strategy/zero_stage3.h"

namespace accel {

std::unique_ptr<Strategy> make_strategy(const Environment& env, const EffectiveSettings& settings,
                                        const PrecisionPolicy& policy) {
  if (!env.comm()) return std::make_unique<SingleDevice>(env.device());
  ReducerOptions options;
  const double cap_mb = settings.bucket_cap_mb.value;
  options.bucket_cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(cap_mb * 1024 * 1024));
  options.first_bucket_cap_bytes = std::min<int64_t>(int64_t{1} << 20, options.bucket_cap_bytes);
  options.comm_dtype = policy.grad_comm;
  const int stage = settings.zero_stage.value;
  if (stage == 0) return std::make_unique<DataParallel>(env, options);
  // ZeRO's collectives get a communicator (and communication thread) of their own.
  if (stage == 1 || stage == 2)
    return std::make_unique<ZeroStage12>(stage, env.device(), env.grads_comm().dup(), policy.grad_comm,
                                         options.bucket_cap_bytes);
  return std::make_unique<ZeroStage3>(env.device(), env.grads_comm().dup(), policy.grad_comm, settings.auto_wrap,
                                      settings.reshard_after_forward);
}

}  // namespace accel
