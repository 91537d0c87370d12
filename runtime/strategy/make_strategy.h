// make_strategy: the Strategy that the environment and settings ask for.
#pragma once

#include <memory>

#include "autograd/precision_policy.h"
#include "runtime/environment.h"
#include "runtime/settings.h"
#include "runtime/strategy/strategy.h"

namespace accel {

// DataParallel when the environment has a communicator between ranks (several processes, or one
// with backend nccl), else SingleDevice. Buckets follow bucket_cap_mb and travel in the policy's
// grad_comm dtype. env must outlive the strategy.
std::unique_ptr<Strategy> make_strategy(const Environment& env, const EffectiveSettings& settings,
                                        const PrecisionPolicy& policy);

}  // namespace accel
