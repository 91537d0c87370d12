// Reducer: averages a model's gradients across data-parallel ranks in buckets, starting each bucket's
// all-reduce from the grad-ready hooks while backward is still computing the rest (PyTorch c10d's
// algorithm, written out small). docs/data_parallel.md walks through it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "collective/work.h"
#include "nn/module.h"

namespace accel {

struct ReducerOptions {
  // A bucket closes before a parameter that would take it past the cap. A parameter larger than the
  // cap gets a bucket of its own.
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // The first bucket of each dtype is small, so the first all-reduce starts early in backward.
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  // The dtype buckets travel in: f32 grads are rounded to f16/bf16 for the all-reduce (half the
  // bytes) and widened back after it. Buckets of another dtype travel as they are.
  DType comm_dtype = DType::f32;
};

// One entry of the reducer's log of its last backward, in the order things happened.
struct ReducerEvent {
  enum class Kind { grad_ready, bucket_launched, backward_done, bucket_finished };
  Kind kind;
  int64_t index = -1;  // the parameter (grad_ready) or the bucket; -1 for backward_done
  bool operator==(const ReducerEvent&) const = default;
};

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  struct Bucket {
    std::vector<size_t> params;  // indices into the parameter list, in the order they were added
    int64_t bytes = 0;           // of the grads (the flat buffer also holds one used-flag per param)
    int64_t cap_bytes = 0;       // the cap it was filled against
    DType dtype = DType::f32;
  };

  // Builds the buckets over named_parameters (in reverse order: backward produces the last
  // parameters' grads first) and installs a grad-ready hook on each parameter. The hooks hold the
  // reducer weakly, so a parameter outliving it is left unaffected. comm is the reducer's own: its
  // all-reduces run on its communication thread. Not collective; every rank must build the same
  // reducer over the same parameters.
  static std::shared_ptr<Reducer> attach(const nn::StateDict& named_parameters, std::shared_ptr<Communicator> comm,
                                         const ReducerOptions& options = {});
  // Takes its hooks off the parameters. In-flight all-reduces hold their buffers themselves; the
  // communicator finishes them.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Call before the engine runs. Parameters without a grad get their (zeroed) bucket slot as grad,
  // so backward accumulates straight into the bucket (c10d's gradient_as_bucket_view). With sync,
  // the grad-ready hooks of this backward launch each bucket's all-reduce as soon as it is full;
  // without, the grads stay local (as on the early micro-batches of an accumulation window).
  void prepare_for_backward(bool sync);
  // Call after the engine has returned, after every prepare_for_backward. A parameter that backward
  // did not reach and had no grad before gets none. With sync it then launches the buckets that are
  // left (such parameters count as zeros), waits for all, and leaves each grad as a view of its
  // averaged slot; a parameter no rank produced a grad for keeps no grad, as in one process.
  void finalize();
  // Forgets a backward that failed half way; its launched all-reduces are waited for by the next
  // prepare_for_backward.
  void disarm();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<std::string>& param_names() const { return names_; }
  // The last backward's events, e.g. for "bucket 0 launched" before "backward done".
  const std::vector<ReducerEvent>& events() const { return events_; }
  std::string describe(const ReducerEvent& event) const;  // "grad ready fc1.weight", "bucket 2 launched"

 private:
  Reducer(const nn::StateDict& named_parameters, std::shared_ptr<Communicator> comm, const ReducerOptions& options);
  void install_hooks();
  void build_buckets(const ReducerOptions& options);
  void on_grad_ready(size_t param);
  // Launches ready buckets in bucket order, stopping at the first one that is not ready yet.
  void launch_ready();
  void return_unused_slots();

  // Per bucket: the flat buffer [grads..., one used flag per param] and where each param lies in it.
  struct BucketState {
    Tensor buffer;
    std::vector<Tensor> slots;  // views of the buffer shaped like each param
    std::vector<Tensor> flags;  // one-element views: 1 if this rank had the param's grad
    int64_t pending = 0;        // params whose grad is not in the buffer yet
    Work work;
    Tensor wire;  // the bucket rounded to comm_dtype while its all-reduce runs; else undefined
  };

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<Communicator> comm_;
  DType comm_dtype_;
  std::vector<Bucket> buckets_;
  std::vector<BucketState> state_;
  std::vector<size_t> bucket_of_;  // param -> bucket
  std::vector<size_t> slot_of_;    // param -> its position within the bucket
  std::vector<bool> ready_;        // backward reached the param (its grad is final)
  std::vector<bool> lent_;         // the param had no grad, so it got its slot as grad
  size_t next_launch_ = 0;
  bool in_backward_ = false;
  bool sync_ = false;
  std::vector<ReducerEvent> events_;
  std::vector<HookHandle> hooks_;
};

}  // namespace accel
