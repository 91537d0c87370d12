// ZeroStage3: ZeRO stage 3 = FSDP FULL_SHARD. Parameters are sharded too: between uses each rank
// holds only its slice of every unit. One step, for a unit u (auto_wrap picks the units; the root
// unit holds the parameters no unit took and stays gathered from the model's forward to the end of
// its backward):
//   forward:  before u's forward, all-gather u's slices into its flat buffer (the parameters are
//             views of it), and start the gather of the next unit (prefetch); after u's forward,
//             free the buffer (reshard_after_forward) and put an identity on u's output whose
//             backward gathers u again.
//   backward: that identity runs before any of u's own backward: gather u (and prefetch the unit
//             before it), lend it flat grads; when u's last grad is ready, reduce-scatter the flat
//             grads (rank r keeps the average of its slice, added to its shard grad) and free u.
//   step:     the ShardOptimizer updates each slice; nothing is gathered until the next forward.
// Every backward reduce-scatters, also on the early micro-steps of an accumulation window (the full
// grads of a unit live only while its backward runs, so there is nothing to keep them in).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/state_match.h"
#include "runtime/sharding_plugins.h"
#include "runtime/strategy/zero_strategy.h"

namespace accel {

// What ZeroStage3 did, in order, for tests and logs: "gather 0", "free 0", "reduce-scatter 0", and
// HybridShard's "replica all-reduce 0" (each started, not finished).
struct ZeroEvent {
  enum class Kind { gather, free, reduce_scatter, replica_all_reduce };
  Kind kind;
  size_t unit;
  bool operator==(const ZeroEvent&) const = default;
};

// Not final: HybridShard (zero_hybrid_shard.h) is this over a shard group, plus an all-reduce of the
// shard grads across the replicas.
class ZeroStage3 : public ZeroStrategy {
 public:
  ZeroStage3(Device device, std::shared_ptr<Communicator> comm, DType comm_dtype, AutoWrapPolicy auto_wrap,
             bool reshard_after_forward);

  void prepare_model(nn::Module& model) override;
  // A deferred-init model's parameters are materialised slice by slice, in the flat units.
  bool materializes_parameter_shards() const override { return true; }
  void before_backward(bool sync) override;
  void after_backward() override;
  void backward_failed() override;

  // (model_state_dict is ZeroStrategy's: gathered from every rank's master slices.)
  // Each rank copies its slices of the full state straight into its shards and f32 master slices (and
  // the buffers whole): no unit is gathered, and there is no collective.
  nn::LoadResult load_model_state_dict(nn::Module& model, const nn::StateDict& state, bool strict) override;
  // The same through a reader, reading only this rank's slices (from a file, only their bytes): no
  // rank holds the whole model.
  nn::LoadResult load_model_state(nn::Module& model, const StateReader& state, bool strict) override;
  bool model_loads_own_shard() const override { return true; }

  // Whether a unit is freed after its forward (else it stays gathered until its backward is done).
  bool reshard_after_forward() const { return reshard_after_forward_; }
  // The unit names of a prepared model ("" is the root unit), in forward order.
  std::vector<std::string> unit_names(const nn::Module& model) const;
  // The log since the last clear_events().
  const std::vector<ZeroEvent>& events() const { return events_; }
  void clear_events() { events_.clear(); }

 protected:
  void before_unit_forward(nn::Module& module) override;
  void after_unit_forward(nn::Module& module, Tensor& output) override;
  void after_unit_backward(nn::Module& module) override;
  // The slice changed: the gathered buffer (the root's, kept) is stale, so it is freed.
  void after_shard_update(Unit& unit) override;
  // Unit u's reduce-scatter has started (during backward, or at its end for units backward did not
  // reach), in the same order on every rank.
  virtual void after_reduce_started(size_t /*u*/) {}
  void log_event(ZeroEvent event) { events_.push_back(event); }

 private:
  struct Place {
    nn::Module* module = nullptr;
    bool root = false;
    bool gathered = false;  // the flat buffer holds the whole unit
    Work gather;            // a gather (prefetch) in flight
    bool reduced = false;   // this backward's reduce-scatter has started
  };

  size_t unit_of(const nn::Module& module) const;
  bool prepared(const nn::Module& model) const;
  // Starts filling u's flat buffer from every rank's slices (no-op when gathered or in flight).
  void start_gather(size_t u);
  // Waits until u's flat buffer is whole.
  void gather(size_t u);
  void free(size_t u);
  // The unit gathered before (step -1) or after (+1) u among the non-root units of u's model.
  void prefetch(size_t u, int step);
  // Backward reached u's output: gather it, prefetch the one before, lend it flat grads.
  void begin_unit_backward(size_t u);
  void reduce_unit(size_t u);

  AutoWrapPolicy auto_wrap_;
  bool reshard_after_forward_;
  std::vector<Place> places_;  // parallel to units_
  std::vector<ZeroEvent> events_;
  bool in_backward_ = false;
};

}  // namespace accel
