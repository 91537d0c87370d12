// CheckedCollectives: the collectives a training script calls through the Accelerator (gather,
// gather_for_metrics, reduce, broadcast, pad_across_processes). Each first exchanges every rank's
// collective, dtype, shape and argument, so ranks that disagree all throw one message instead of hanging.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/call_site.h"
#include "collective/reduce_op.h"
#include "runtime/environment.h"
#include "runtime/gradient_state.h"
#include "tensor/tensor.h"

namespace accel {

class CheckedCollectives {
 public:
  // env outlives this. gradient_state says how many rows of the last batch were padding.
  CheckedCollectives(const Environment& env, std::shared_ptr<const GradientState> gradient_state);

  // Every k adjacent ranks read the same data (a tensor-parallel group): gather_for_metrics keeps the
  // first of each k ranks' rows. 1 unless a strategy says otherwise.
  void set_ranks_per_data_shard(int k) { ranks_per_data_shard_ = k; }

  // See Accelerator for each one's contract.
  Tensor gather(const Tensor& tensor, const CallSite& site);
  Tensor gather_for_metrics(const Tensor& tensor, const CallSite& site);
  Tensor reduce(const Tensor& tensor, ReduceOp op, const CallSite& site);
  // "sum" or "mean", Accelerate's names.
  Tensor reduce(const Tensor& tensor, const std::string& reduction, const CallSite& site);
  Tensor broadcast(const Tensor& tensor, int from, const CallSite& site);
  Tensor pad_across_processes(const Tensor& tensor, int64_t dim, double pad_index, bool pad_first,
                              const CallSite& site);

 private:
  // Each rank's dtype, shape and one extra number, exchanged so that every rank can check that the
  // ranks agree before the real collective.
  struct TensorInfo {
    bool defined = false;
    DType dtype = DType::f32;
    Shape shape;
    int64_t extra = 0;
  };
  std::vector<TensorInfo> exchange_info(const char* op, const Tensor& tensor, int64_t extra);
  static std::string shapes_of(const std::vector<TensorInfo>& infos);  // "rank 0 [2, 3], rank 1 [2, 4]"
  // gather, dropping the last `padding` rows of each rank's part (every rank passes its own), and the
  // parts of all but every `stride`-th rank.
  Tensor gather_rows(const char* op, const Tensor& tensor, int64_t padding, int stride = 1);
  // reduce with the reduction as it travels (a ReduceOp's value, or unsupported) and as asked.
  Tensor reduce_as(const Tensor& tensor, int64_t code, const std::string& asked);

  const Environment& env_;
  CallSite site_;  // the user's call being served, for the ledger
  std::shared_ptr<const GradientState> gradient_state_;
  int ranks_per_data_shard_ = 1;
};

}  // namespace accel
