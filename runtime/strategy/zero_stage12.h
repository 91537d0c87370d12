// ZeroStage12: ZeRO stages 1 and 2. Every rank holds the whole model; its parameters are cut into
// units (buckets of about bucket_cap_bytes, in reverse order, as the DDP reducer's), each a flat
// padded buffer that rank r owns 1/N of.
//   stage 1: backward fills full flat grads; after a syncing backward each unit is reduce-scattered
//            in place, so rank r's part of its full grads holds the average of its slice; r updates
//            its slice (only it has optimizer state for it) and the updated slices are all-gathered
//            into every rank's parameters.
//   stage 2: the same, but each unit's reduce-scatter starts from the grad-ready hooks as soon as its
//            last grad is final, while backward goes on, and the full grads are dropped once sent.
// Early micro-steps of an accumulation window (and no_sync) only accumulate local grads: no
// communication at all until the backward that syncs.
#pragma once

#include <memory>
#include <vector>

#include "runtime/strategy/zero_strategy.h"
#include "tensor/hook_list.h"

namespace accel {

class ZeroStage12 final : public ZeroStrategy {
 public:
  ZeroStage12(int stage, Device device, std::shared_ptr<Communicator> comm, DType comm_dtype,
              int64_t bucket_cap_bytes);
  ~ZeroStage12() override;

  void prepare_model(nn::Module& model) override;
  void before_backward(bool sync) override;
  void after_backward() override;
  void backward_failed() override;

 protected:
  // The updated slices, all-gathered in place into the flat buffer the parameters are views of.
  void after_shard_update(Unit& unit) override;

 private:
  // Stage 2: the hook of parameter j of unit u.
  void on_grad_ready(size_t u, size_t j);
  // Stage 2: starts the reduce-scatters of units whose grads are all final, in unit order (the same
  // order on every rank), stopping at the first that is not.
  void launch_ready();

  int64_t bucket_cap_bytes_;
  std::vector<HookHandle> hooks_;
  std::vector<std::vector<bool>> ready_;  // per unit and parameter: its grad is final this backward
  std::vector<int64_t> pending_;          // per unit: parameters not final yet
  size_t next_launch_ = 0;
  bool in_backward_ = false;
  bool sync_ = false;
};

}  // namespace accel
