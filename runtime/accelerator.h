// Accelerator: the facade a training loop talks to. It resolves the settings and builds the three
// parts that do the work: an Environment (process, device, communicators), a Strategy (how models
// are spread over the ranks) and a Precision (the numeric recipe). prepare hands models, optimizers
// and data to them; backward, accumulation, clipping and the collectives go through them.
#pragma once

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <future>
#include <nlohmann/json_fwd.hpp>
#include <tuple>
#include <typeinfo>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/precision_policy.h"
#include "collective/communicator.h"
#include "collective/reduce_op.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "runtime/checked_collectives.h"
#include "runtime/checkpoint/training_checkpoint.h"
#include "runtime/checkpoint_io.h"
#include "runtime/data_loader.h"
#include "runtime/environment.h"
#include "runtime/faults/watchdog.h"
#include "runtime/gradient_accumulation.h"
#include "runtime/gradient_state.h"
#include "runtime/precision/loss_scaler.h"
#include "runtime/precision/precision.h"
#include "runtime/process_state.h"
#include "runtime/progress_bar.h"
#include "runtime/sanity_report.h"
#include "runtime/scope.h"
#include "runtime/settings.h"
#include "runtime/strategy/reducer.h"
#include "runtime/strategy/strategy.h"
#include "runtime/tensor_tree.h"
#include "optim/lr_schedule.h"
#include "runtime/tracking/tracker.h"
#include "runtime/tracking/trackers.h"
#include "runtime/training_step.h"
#include "tensor/tensor.h"

namespace accel {

class Accelerator {
 public:
  // Under a launcher (world size > 1) this is collective: every rank constructs its Accelerator,
  // which starts MPI if nobody has (MPI then stays up until the program exits, so later
  // Accelerators in the same program can join again) and builds the communicator.
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  Device device() const { return env_->device(); }
  int process_index() const { return env_->process().rank; }
  int local_process_index() const { return env_->process().local_rank; }
  int num_processes() const { return env_->process().world_size; }
  bool is_main_process() const { return env_->process().is_main_process(); }
  bool is_local_main_process() const { return env_->process().is_local_main_process(); }
  bool is_last_process() const { return process_index() == num_processes() - 1; }
  // Accelerate's properties: "NO" (one process), "MULTI_CPU" or "MULTI_GPU"; the precision in
  // effect; whether there are several processes.
  std::string distributed_type() const;
  MixedPrecision mixed_precision() const { return settings_.mixed_precision.value; }
  bool use_distributed() const { return num_processes() > 1; }
  const EffectiveSettings& settings() const { return settings_; }
  int gradient_accumulation_steps() const { return accumulation_.steps(); }
  // "mpi", "ring" or "nccl" with several processes (or one with backend nccl), "none" with one.
  const std::string& backend() const { return env_->backend(); }
  // The communicator between the ranks; null when there is one process.
  Communicator* communicator() const { return env_->comm(); }
  // The three parts the Accelerator is made of.
  const Environment& environment() const { return *env_; }
  Strategy& strategy() { return *strategy_; }
  const Strategy& strategy() const { return *strategy_; }
  Precision& precision() { return *precision_; }
  const Precision& precision() const { return *precision_; }

  // Prepares each object for this process and returns them in order, so that
  //   auto [model, optimizer, data] = accelerator.prepare(model, optimizer, loader);
  // and one object comes back as itself: auto net = accelerator.prepare(model).
  // Models, optimizers and LR schedulers are shared_ptrs, returned as the same objects, ready (a
  // scheduler then counts only real optimizer steps, and save_state saves it). DataLoaders are
  // returned as sharded copies that yield batches on this process's device. Anything else comes back
  // unchanged. Collective with several processes: every rank prepares the same models in the same order.
  template <class... Objects>
  auto prepare(Objects&&... objects) {
    if constexpr (!(Preparable<std::decay_t<Objects>>::value && ...)) {
      // One readable error, instead of a cascade from the tuple below.
      static_assert(!(IsPlainModule<std::decay_t<Objects>>::value || ...),
                    "Accelerator::prepare: pass a model as a std::shared_ptr (std::make_shared<Model>(...)); prepare "
                    "shares it with the caller and registers its hooks on that object");
      static_assert(!(std::is_same_v<std::decay_t<Objects>, Tensor> || ...),
                    "Accelerator::prepare: a Tensor is not prepared; move it with to(tensor, accelerator.device())");
      static_assert(!(IsPlainOptimizerOrScheduler<std::decay_t<Objects>>::value || ...),
                    "Accelerator::prepare: pass an optimizer or an LRScheduler as a std::shared_ptr");
      // Placeholders of the right count, so that `auto [net, opt] = prepare(...)` adds no second error.
      if constexpr (sizeof...(Objects) == 1) return NotPrepared<Objects...>{};
      else return std::tuple<NotPrepared<Objects>...>{};
    } else if constexpr (sizeof...(Objects) == 1) {
      return prepare_one(std::forward<Objects>(objects)...);  // one object comes back as itself
    } else {
      return std::tuple{prepare_one(std::forward<Objects>(objects))...};
    }
  }

  // The precision policy built from mixed_precision and grad_comm_dtype (printed once at start).
  const PrecisionPolicy& precision_policy() const { return precision_->policy(); }
  // The autocast scope for the forward pass and the loss: matmuls and linear layers run in the compute
  // dtype (prepared models' weights through their low-precision copies), softmax, norms and losses in
  // f32. Does nothing when mixed_precision is no. Keep it in a named variable:
  //   { auto autocast = accelerator.autocast(); loss = loss_of(model->forward(x), y); }
  //   accelerator.backward(loss);
  AutocastGuard autocast() const;
  // The fp16 loss scaler; null with bf16 or no.
  LossScaler* loss_scaler() { return precision_->loss_scaler(); }
  const LossScaler* loss_scaler() const { return precision_->loss_scaler(); }
  // Whether the last step() of a prepared optimizer was skipped because some rank's grads overflowed.
  bool optimizer_step_was_skipped() const { return training_step_->last_step_skipped(); }
  // The first-step sanity report (AcceleratorOptions::check); null when it is off. Its lines are
  // printed on the main process after the first real step of each prepared optimizer.
  const SanityReport* sanity_report() const { return sanity_report_.get(); }
  // Tells the Accelerator that prepared models' weights changed outside a prepared optimizer's step
  // (a load_state_dict, a manual edit), so the low-precision copies are rounded again on next use.
  void weights_changed();

  // Use instead of loss.backward(): runs backward, with the gradients of prepared models averaged
  // across processes (unless inside no_sync() or on an accumulate() micro-step that does not sync);
  // inside accumulate() the loss is divided by the accumulation window's size.
  void backward(const Tensor& loss);
  // The reducer of a prepared model (its buckets and event log); null with one process.
  const Reducer* reducer(const nn::Module& model) const;

  // A scope that ends with the object (a RAII guard). Keep it in a named variable.
  using Scope = accel::Scope;

  // Gradient accumulation over gradient_accumulation_steps() micro-batches:
  //   for (const Batch& batch : data) {
  //     auto scope = accelerator.accumulate();
  //     opt->zero_grad(); accelerator.backward(loss_of(batch)); opt->step();
  //   }
  // Within a window, backward syncs only on the last micro-batch and divides the loss by the
  // window's size; the prepared optimizer's step() and zero_grad() do nothing until the window is
  // complete. Windows follow the prepared DataLoader's position in its epoch, so the last window
  // of an epoch may be shorter (and syncs at the end of the data); without a prepared loader,
  // every k-th call to accumulate() closes a window.
  Scope accumulate();
  // Accelerate's spelling, accumulate(model): the window covers every prepared model either way.
  template <class... Models>
  Scope accumulate(const std::shared_ptr<Models>&...) {
    static_assert((std::is_base_of_v<nn::Module, Models> && ...), "Accelerator::accumulate takes prepared models");
    return accumulate();
  }
  // True when the current micro-step ends an accumulation window (always true outside accumulate()).
  bool sync_gradients() const { return accumulation_.sync_gradients(); }
  // Within this scope, backward leaves gradients local (no all-reduce) and never divides the loss.
  Scope no_sync();
  // Accelerate's spelling, no_sync(model): every prepared model's grads stay local either way.
  template <class... Models>
  Scope no_sync(const std::shared_ptr<Models>&...) {
    static_assert((std::is_base_of_v<nn::Module, Models> && ...), "Accelerator::no_sync takes prepared models");
    return no_sync();
  }

  // Scales the grads of params so their total norm_type-norm is at most max_norm and returns the norm
  // before clipping. The norm is the strategy's: over every rank's shards where grads are sharded;
  // after a data-parallel backward every rank holds the same averaged grads, so the local norm is
  // already the global one and no extra all-reduce is needed. norm_type may be inf.
  // With fp16 the grads are unscaled first (once: the step then does not unscale them again), an
  // overflow on any rank makes the norm inf or NaN and the step skip, and clipping must wait for the
  // micro-step that updates (sync_gradients()).
  double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
  double clip_grad_norm(const nn::Module& model, double max_norm, double norm_type = 2.0);

  // A loss normalised by the global number of items (target tokens, say) of an accumulation window,
  // so that a window whose micro-batches are padded or hold ignore_index targets, unevenly across
  // micro-batches and ranks, still follows the exact gradient of the global mean:
  //
  //   const int64_t n = accelerator.num_items(local_count);  // once per window, before its first backward
  //   for (each micro-batch m of the window) {               // inside accumulate() or no_sync(), as usual
  //     Tensor sum = cross_entropy(logits_m, targets_m, {.reduction = Reduction::sum});
  //     accelerator.backward(accelerator.scale_sum_loss(sum, n));
  //   }
  //
  // num_items: local_count is this rank's count over all the window's micro-batches (>= 0); the
  // result is the sum of every data-parallel rank's local_count, N. One all-reduce of one number on
  // the ranks' communicator, named "num_items" in the ledger (none with one process), so call it once
  // per window, not once per micro-batch. Collective. Ranks that hold replicas of one data-parallel
  // rank (a tensor-parallel group, which reads the same data, DataShard) pass the same count; the
  // world's sum is divided by their number.
  int64_t num_items(int64_t local_count, CallSite site = "num_items");
  // The loss to hand to backward for a micro-batch whose loss is a sum over its items (reduction
  // sum): sum_loss * D * k / num_items, with D the data-parallel ranks the strategy averages grads over
  // and k what backward divides this micro-step's loss by (the window's size inside accumulate(), 1
  // outside it or inside no_sync()). backward's division by k and the strategy's mean over D cancel
  // those factors, so that each micro-batch backpropagates sum_loss * D / N and, once the window's
  // grads are synced, every rank holds grad(sum over the window's micro-batches and every rank of
  // sum_loss) / N: the gradient of the global mean over items. num_items == 0 (nothing counted) gives
  // a zero loss. Call it inside the micro-step's accumulate() scope, which sets k.
  Tensor scale_sum_loss(const Tensor& sum_loss, int64_t num_items) const;

  // The collectives below are collective calls (every rank makes them, in the same order). The ranks
  // first exchange their tensors' dtypes and shapes, so ranks that disagree all throw one message
  // instead of hanging. With one process each returns its input (a 0-d one as [1] from the gathers).
  //
  // Every rank's tensor concatenated along dim 0, in rank order (a 0-d tensor counts as one row).
  // Dim 0 may differ between ranks; the other dims and the dtype may not.
  Tensor gather(const Tensor& tensor, CallSite site = {}) { return collectives_.gather(tensor, site); }
  // gather, minus the rows that repeat samples to pad the last batches (even_batches), and minus the
  // copies of the other ranks of a tensor-parallel group (which read the same batch), so that over
  // an epoch every sample is counted exactly once. Dim 0 of tensor must index the samples of the
  // batch the prepared DataLoader produced last.
  Tensor gather_for_metrics(const Tensor& tensor, CallSite site = {}) {
    return collectives_.gather_for_metrics(tensor, site);
  }
  // The elementwise reduction of every rank's tensor (same shape everywhere), as a new tensor.
  Tensor reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum, CallSite site = {}) {
    return collectives_.reduce(tensor, op, site);
  }
  // Accelerate's names: "sum" or "mean".
  Tensor reduce(const Tensor& tensor, const std::string& reduction, CallSite site = {}) {
    return collectives_.reduce(tensor, reduction, site);
  }
  // Rank from's tensor, as a new tensor on every rank (same shape everywhere).
  Tensor broadcast(const Tensor& tensor, int from = 0, CallSite site = {}) {
    return collectives_.broadcast(tensor, from, site);
  }
  // Pads tensor along dim with pad_index up to the largest size any rank holds there (at the end, or
  // at the start with pad_first), so that it can be gathered.
  Tensor pad_across_processes(const Tensor& tensor, int64_t dim = 0, double pad_index = 0, bool pad_first = false,
                              CallSite site = {}) {
    return collectives_.pad_across_processes(tensor, dim, pad_index, pad_first, site);
  }

  // The same four on a nested structure of tensors (vectors and string maps of tensors, to any
  // depth), leaf by leaf; the result has the input's structure. The ranks first compare their
  // structures, so different keys or lengths throw one message instead of hanging.
  template <NestedTensors Tree>
  Tree gather(const Tree& tree, CallSite site = {}) {
    return each_leaf("gather", tree, site, [&](const Tensor& t) { return gather(t, site); });
  }
  template <NestedTensors Tree>
  Tree gather_for_metrics(const Tree& tree, CallSite site = {}) {
    return each_leaf("gather_for_metrics", tree, site, [&](const Tensor& t) { return gather_for_metrics(t, site); });
  }
  template <NestedTensors Tree>
  Tree reduce(const Tree& tree, ReduceOp op = ReduceOp::sum, CallSite site = {}) {
    return each_leaf("reduce", tree, site, [&](const Tensor& t) { return reduce(t, op, site); });
  }
  template <NestedTensors Tree>
  Tree reduce(const Tree& tree, const std::string& reduction, CallSite site = {}) {
    return each_leaf("reduce", tree, site, [&](const Tensor& t) { return reduce(t, reduction, site); });
  }
  template <NestedTensors Tree>
  Tree broadcast(const Tree& tree, int from = 0, CallSite site = {}) {
    return each_leaf("broadcast", tree, site, [&](const Tensor& t) { return broadcast(t, from, site); });
  }

  // JSON values (strings, numbers, lists, maps) between the ranks. Collective.
  // Every rank's object, in rank order.
  std::vector<nlohmann::json> gather_object(const nlohmann::json& object, CallSite site = {});
  // Rank from's objects on every rank; every rank passes a list of the same length.
  std::vector<nlohmann::json> broadcast_object_list(const std::vector<nlohmann::json>& objects, int from = 0,
                                                    CallSite site = {});

  // This rank's contiguous part of items: the first (size % n) ranks get one more. With
  // apply_padding every rank gets as many, the short ones repeating their last item (so that a
  // gather gives equal rows). Not collective.
  template <class T>
  std::vector<T> split_between_processes(const std::vector<T>& items, bool apply_padding = false) const {
    const size_t n = static_cast<size_t>(num_processes()), r = static_cast<size_t>(process_index());
    const size_t base = items.size() / n, extra = items.size() % n;
    const size_t begin = r * base + std::min(r, extra), count = base + (r < extra ? 1 : 0);
    std::vector<T> part(items.begin() + static_cast<std::ptrdiff_t>(begin),
                        items.begin() + static_cast<std::ptrdiff_t>(begin + count));
    if (apply_padding && extra != 0 && count == base && !items.empty())
      part.push_back(part.empty() ? items.back() : part.back());
    return part;
  }

  // An early-stop flag: any rank may set it; check_trigger (collective, one all-reduce) is then
  // true on every rank, and clears it.
  void set_trigger() { trigger_ = true; }
  bool check_trigger(CallSite site = {});

  // f() on those processes only.
  template <class F>
  void on_main_process(F&& f) const { if (is_main_process()) f(); }
  template <class F>
  void on_local_main_process(F&& f) const { if (is_local_main_process()) f(); }
  template <class F>
  void on_last_process(F&& f) const { if (is_last_process()) f(); }
  template <class F>
  void on_process(int index, F&& f) const { if (process_index() == index) f(); }

  // Prints its arguments separated by spaces, on the main process only (or on each machine's local
  // main process with AcceleratorOptions::print_on_every_machine).
  template <class... Args>
  void print(const Args&... args) const {
    if (!(print_on_every_machine_ ? is_local_main_process() : is_main_process())) return;
    std::ostringstream line;
    bool first = true;
    ((line << (first ? "" : " ") << args, first = false), ...);
    std::cout << line.str() << std::endl;
  }

  // Trackers (docs/tracking.md), as AcceleratorOptions::log_with chose them. Not collective.
  // Starts the run: the built-in trackers write into logging_dir/project_name (ProjectConfiguration;
  // logging_dir empty: project_dir, and an accel::Error if both are empty), on the main process only,
  // and every tracker stores config, a JSON object of hyper-parameters. Nothing happens when log_with
  // is empty.
  void init_trackers(const std::string& project_name);
  void init_trackers(const std::string& project_name, const nlohmann::json& config);
  // Hands values, a JSON object of names to numbers such as {{"loss", 0.25}, {"lr", 1e-3}}, to the
  // trackers, at step (default: completed_steps()). Every rank may call it: the built-in trackers
  // write on the main process only.
  void log(const nlohmann::json& values, std::optional<int64_t> step = std::nullopt);
  // Flushes and closes the trackers (the destructor does it too); init_trackers may start a new run.
  void end_training();
  // The running tracker of that name ("jsonl", "csv", "tensorboard" or a user tracker's name) on this
  // rank, or null (not asked for, not started, or not run on this rank).
  Tracker* get_tracker(const std::string& name) const { return trackers_->get(name); }

  // A progress bar over total steps (ProgressBarOptions: where and how often it prints) that prints
  // on the main process only, as plain lines under a launcher (mpirun's ranks write to a
  // pseudo-terminal whatever mpirun's own output is) unless options.terminal says otherwise:
  //   auto bar = accelerator.progress_bar(steps, {.description = "train"});
  //   ... bar.set("loss", loss.item()); bar.update();
  ProgressBar progress_bar(int64_t total, ProgressBarOptions options = {}, int64_t start = 0) const;

  // Blocks until every process reaches it.
  void wait_for_everyone(CallSite site = {});
  // Between two trainings: lets go of everything the Accelerator keeps for what it prepared (the
  // strategy's buckets and shards, the precision's low-precision copies and loss scale, the
  // accumulation count, an async save's host buffers) and returns cached allocator memory. Objects
  // prepared before are left unprepared: their hooks are removed, so they train plainly. Waits for
  // a pending save. Collective with several processes (the new strategy may build communicators).
  void free_memory();
  // What this process's allocators hold: the host's first, then the accelerator's device when it is
  // a GPU. Bytes in use, their peak since the last reset_peak_memory_stats, and the cached blocks.
  struct DeviceMemory {
    Device device;
    MemoryStats stats;
  };
  std::vector<DeviceMemory> memory_stats() const;
  void reset_peak_memory_stats();
  // The main process runs the scope first; the others enter theirs once it has left its own (for
  // work such as downloading or preprocessing a data set once).
  Scope main_process_first();
  // The same with each machine's local main process first (it waits for every rank, as Accelerate's).
  Scope local_main_process_first();
  // The model the user built (prepare does not wrap it).
  template <class M>
  std::shared_ptr<M> unwrap_model(const std::shared_ptr<M>& model) const {
    return model;
  }
  // Writes dir/model.safetensors with the model's state_dict (main process only), creating dir.
  void save_model(const nn::Module& model, const std::string& dir);
  // Loads a model's full state from path: a safetensors file, or a directory holding save_model's
  // model.safetensors, Hugging Face's model-0000k-of-0000n shards with their index, or a checkpoint's
  // per-rank shards. Every rank reads it (no collective) and keeps what it holds; under FULL_SHARD
  // and HYBRID_SHARD each rank reads only its slices' bytes, so a prepared model that no rank can hold
  // whole (built under DeferredInit) takes pretrained weights. Before prepare, a model built under
  // DeferredInit takes the file as its init instead: prepare then reads from it what each rank keeps,
  // and draws nothing the file overwrites. strict: every key and shape must fit, else accel::Error
  // names the ones that do not.
  nn::LoadResult load_model(nn::Module& model, const std::string& path, bool strict = true);

  // Checkpoints for an exact resume (docs/checkpoints.md). Collective: every rank calls them.
  // save_state writes every prepared model, optimizer and loader position, the precision's state, the
  // registered objects and every rank's random streams into dir, whole or not at all, and returns dir.
  // With dir empty it needs ProjectConfiguration's automatic naming: project_dir/checkpoints/
  // checkpoint_<n>, keeping the newest total_limit of them. With {.async = true} it returns once the
  // state is copied to host memory and writes it in the background; the next save or load, or the
  // Accelerator's end, waits for that write (and rethrows its error).
  std::string save_state(const std::string& dir = "", const SaveStateOptions& options = {});
  // Restores a save_state of the same prepared objects (prepare them, then load). dir empty or
  // "latest": the newest complete automatic checkpoint. A prepared loader then continues its epoch at
  // the first sample the saved run had not seen. Returns the directory loaded.
  std::string load_state(const std::string& dir = "");
  // Blocks until an async save_state has written its checkpoint, and rethrows its error if it failed.
  void wait_for_save();
  // Preemption (docs/checkpoints.md): true once a SIGTERM reached any rank since the first call. Call
  // it on every rank at the same point of each step, after the optimizer step; it costs one small
  // all-reduce (none inside an accumulation window, where it says false). When it turns true with
  // ProjectConfiguration's automatic naming, every rank has saved the same step first. Then leave the
  // loop and return kPreemptedExitStatus from main, which `accel launch` reports as a preemption.
  bool should_stop(CallSite site = {});
  // Optimizer steps taken (window ends), carried by checkpoints: after load_state, the saved run's.
  int64_t completed_steps() const { return training_step_->completed_steps(); }
  // Adds an object with state_dict() / load_state_dict(StateDict) (an LRScheduler, ...) to the
  // checkpoints; it must outlive the Accelerator's saves and loads. A Generator's stream is saved per
  // rank.
  template <class T>
  void register_for_checkpointing(T& object) {
    parts_.objects.push_back({typeid(T).name(), [&object] { return object.state_dict(); },
                              [&object](const nn::StateDict& state) { object.load_state_dict(state); }});
  }
  void register_for_checkpointing(Generator& generator) { parts_.generators.push_back(&generator); }
  // Writes state as a safetensors file (main process only), as Accelerate's accelerator.save.
  void save(const nn::StateDict& state, const std::string& file);
  // The model's full, unsharded state (gathered where a strategy shards it). Collective.
  nn::StateDict get_state_dict(const nn::Module& model) const { return strategy_->model_state_dict(model); }

 private:
  template <class T>
  struct NotPrepared {};
  template <class T>
  struct IsPlainModule : std::is_base_of<nn::Module, T> {};
  template <class T>
  struct IsPlainOptimizerOrScheduler
      : std::bool_constant<std::is_base_of_v<optim::Optimizer, T> || std::is_same_v<T, optim::LRScheduler>> {};
  template <class T>
  struct Preparable : std::bool_constant<!IsPlainModule<T>::value && !std::is_same_v<T, Tensor> &&
                                         !IsPlainOptimizerOrScheduler<T>::value> {};
  // Whether P is a shared_ptr to a Base or to a class derived from it.
  template <class P, class Base>
  struct IsSharedPtrTo : std::false_type {};
  template <class T, class Base>
  struct IsSharedPtrTo<std::shared_ptr<T>, Base> : std::is_base_of<Base, T> {};

  template <class T>
  auto prepare_one(T&& object) {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, DataLoader>) {
      return prepare_data_loader(object);
    } else if constexpr (IsSharedPtrTo<D, nn::Module>::value) {
      prepare_model(object);
      return object;
    } else if constexpr (IsSharedPtrTo<D, optim::Optimizer>::value) {
      prepare_optimizer(object);
      return object;
    } else if constexpr (std::is_same_v<D, std::shared_ptr<optim::LRScheduler>>) {
      // It counts the optimizer's real steps (AcceleratorOptions::step_scheduler_with_optimizer), and
      // checkpoints carry it; it stays alive with the Accelerator.
      training_step_->add(object);
      parts_.objects.push_back({"LRScheduler", [object] { return object->state_dict(); },
                                [object](const nn::StateDict& state) { object->load_state_dict(state); }});
      return object;
    } else {
      return D(std::forward<T>(object));  // not ours to prepare: returned unchanged, as Accelerate does
    }
  }

  void prepare_model(const std::shared_ptr<nn::Module>& model);
  void prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer);
  // The names of the optimizer's parameters in the prepared models ("model_<i>." before the
  // second model's names, "param_<i>" for one in no prepared model): its checkpoint keys.
  std::vector<std::string> parameter_names(const optim::Optimizer& optimizer) const;
  DataLoader prepare_data_loader(const DataLoader& loader);
  void print_settings() const;
  template <class Tree, class F>
  Tree each_leaf(const char* op, const Tree& tree, const CallSite& site, F f) {
    check_same_structure(op, structure_of(tree), site);
    return map_leaves(tree, f);
  }
  // Throws on every rank when the ranks' structures differ (one gather of the structures' text).
  void check_same_structure(const char* op, const std::string& structure, const CallSite& site);
  // The strategy, the precision and the training step, built from the settings (again in free_memory).
  void build_training_parts();
  // With settings().trace_dir: starts this rank's timeline (docs/debugging.md, "Timeline").
  void start_timeline();
  // The largest of every rank's value: one all-reduce of one number (a flag the ranks agree on).
  double max_over_ranks(double value, const CallSite& site) const;

  // Declared in the order they are built; destroyed in reverse, so the strategy and the precision go
  // before the environment whose communicators they use.
  EffectiveSettings settings_;
  std::optional<LossScalerOptions> loss_scaler_options_;
  SchedulerStepping scheduler_stepping_;
  std::unique_ptr<Environment> env_;
  std::unique_ptr<Precision> precision_;
  std::unique_ptr<Strategy> strategy_;
  std::shared_ptr<GradientState> gradient_state_ = std::make_shared<GradientState>();
  GradientAccumulation accumulation_;
  std::shared_ptr<TrainingStep> training_step_;  // prepared optimizers hold it weakly
  CheckedCollectives collectives_;
  std::unique_ptr<CheckpointIO> checkpoint_io_ = std::make_unique<SafetensorsCheckpointIO>();
  bool even_batches_ = true;
  bool split_batches_ = false;
  bool print_on_every_machine_ = false;
  ProjectConfiguration project_;
  std::unique_ptr<Trackers> trackers_;
  bool stopping_ = false;  // should_stop has said true (and saved)
  bool trigger_ = false;   // set_trigger, until check_trigger
  TrainingParts parts_;  // what checkpoints hold; the pointers are to the members above
  std::unique_ptr<SanityReport> sanity_report_;  // reads parts_; the training step calls it
  // An async save: its own communicator for the writer thread's barriers, and the write itself.
  std::shared_ptr<Communicator> checkpoint_comm_;
  std::future<void> pending_save_;
  // Its snapshot, whose host buffers the next async save copies into once the write is done.
  std::shared_ptr<const CheckpointSnapshot> async_snapshot_;
  // With several processes: reports a collective that stalls past settings().timeout and ends the job.
  std::unique_ptr<Watchdog> watchdog_;
  // With settings().trace_dir: this Accelerator started the timeline (and stops it, writing the
  // file, when it ends); the forward spans of its prepared models.
  bool timeline_started_ = false;
  std::vector<HookHandle> timeline_hooks_;
};

}  // namespace accel
