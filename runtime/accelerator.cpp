// Accelerator: builds the Environment, Precision and Strategy from the settings, and routes each call
// of a training loop to them.
#include "runtime/accelerator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "collective/ledger.h"
#include "collective/timeline.h"
#include "nn/materialize.h"
#include "nn/parallel/split_layer.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/checkpoint/preemption.h"
#include "runtime/object_collectives.h"
#include "runtime/deferred_load.h"
#include "runtime/precision/make_precision.h"
#include "runtime/prepared_names.h"
#include "runtime/safetensors.h"
#include "runtime/state_reader.h"
#include "runtime/strategy/data_parallel.h"
#include "runtime/strategy/make_strategy.h"
#include "tensor/creation.h"
#include "tensor/deferred_init.h"
#include "tensor/deterministic.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

namespace {
std::vector<std::shared_ptr<Tracker>> user_trackers(const AcceleratorOptions& options) {
  std::vector<std::shared_ptr<Tracker>> out;
  for (const TrackerChoice& choice : options.log_with)
    if (choice.tracker()) out.push_back(choice.tracker());
  return out;
}
}  // namespace

Accelerator::Accelerator(AcceleratorOptions options)
    : settings_(resolve_settings(options, environment_variables())),
      loss_scaler_options_(options.loss_scaler),
      scheduler_stepping_{options.step_scheduler_with_optimizer,
                          options.split_batches ? 1 : ProcessState::from_environment().world_size},
      env_(std::make_unique<Environment>(ProcessState::from_environment(), settings_)),
      accumulation_(settings_.gradient_accumulation_steps.value, gradient_state_),
      collectives_(*env_, gradient_state_),
      even_batches_(options.even_batches),
      split_batches_(options.split_batches),
      print_on_every_machine_(options.print_on_every_machine),
      project_(options.project_configuration),
      trackers_(std::make_unique<Trackers>(settings_.log_with.value, user_trackers(options), is_main_process())) {
  set_deterministic_mode(settings_.deterministic.value);
  set_collective_checks(settings_.debug.value);
  if (num_processes() > 1) {
    install_failure_naming(process_index(), run_directory());
    watchdog_ = std::make_unique<Watchdog>(WatchdogOptions{.rank = process_index(),
                                                           .world_size = num_processes(),
                                                           .timeout_s = static_cast<double>(settings_.timeout.value),
                                                           .run_dir = run_directory()});
  }
  build_training_parts();
  start_timeline();
  if (options.print_settings && is_main_process()) print_settings();
  // Once per process: a program may build several Accelerators (a test, a sweep).
  static std::once_flag alias_notes_printed;
  if (is_main_process() && !settings_.alias_notes.empty())
    std::call_once(alias_notes_printed, [&] {
      for (const std::string& note : settings_.alias_notes) std::cerr << note << "\n";
      std::cerr << std::flush;
    });
}

void Accelerator::build_training_parts() {
  precision_ = make_precision(settings_, loss_scaler_options_, env_->comm(), env_->device());
  strategy_ = make_strategy(*env_, settings_, precision_->policy());
  // The ranks of one data shard (a tensor-parallel group) read the same batch: a step is one batch per
  // shard, and gather_for_metrics keeps one copy of each shard's rows.
  const int shards = strategy_->data_shard().world_size;
  if (!split_batches_) scheduler_stepping_.processes = shards;
  collectives_.set_ranks_per_data_shard(env_->world_size() / shards);
  training_step_ = std::make_shared<TrainingStep>(accumulation_, *precision_, *strategy_, scheduler_stepping_);
  parts_ = TrainingParts{};
  parts_.env = env_.get();
  parts_.strategy = strategy_.get();
  parts_.precision = precision_.get();
  parts_.accumulation = &accumulation_;
  parts_.training_step = training_step_.get();
  sanity_report_ = settings_.check.value ? std::make_unique<SanityReport>(parts_) : nullptr;
  training_step_->set_observer(sanity_report_.get());
}

std::vector<Accelerator::DeviceMemory> Accelerator::memory_stats() const {
  std::vector<DeviceMemory> out{{Device::cpu(), memory_stats_of(Device::cpu())}};
  if (device().is_cuda()) out.push_back({device(), memory_stats_of(device())});
  return out;
}

void Accelerator::reset_peak_memory_stats() {
  reset_peak_memory_stats_of(Device::cpu());
  if (device().is_cuda()) reset_peak_memory_stats_of(device());
}

void Accelerator::free_memory() {
  wait_for_save();
  async_snapshot_.reset();
  // In the reverse of their building: each part uses the ones built before it.
  training_step_.reset();
  strategy_.reset();
  precision_.reset();
  *gradient_state_ = GradientState{};
  accumulation_ = GradientAccumulation(settings_.gradient_accumulation_steps.value, gradient_state_);
  stopping_ = trigger_ = false;
  build_training_parts();
  empty_cache_of(Device::cpu());
  if (device().is_cuda()) empty_cache_of(device());
}

// The ranks take their clock origin right after a barrier, so that their files line up in one view
// (to within the barrier's skew) on one machine or many.
void Accelerator::start_timeline() {
  // Another Accelerator of this process records already (a program may hold two): it owns the file.
  if (settings_.trace_dir.value.empty() || timeline::enabled()) return;
  const std::filesystem::path dir = std::filesystem::absolute(settings_.trace_dir.value);
  if (env_->comm() && num_processes() > 1) env_->comm()->barrier("timeline clock origin");
  timeline::start((dir / fmt::format("accel_trace_rank{}.json", process_index())).string(), process_index(),
                  num_processes(), host_name(), steady_ns());
  timeline::name_thread("main");
  timeline_started_ = true;
}

Accelerator::~Accelerator() {
  for (HookHandle& hook : timeline_hooks_) hook.remove();
  try {
    wait_for_save();
  } catch (const std::exception& e) {
    // A destructor cannot throw: say which save was lost.
    std::cerr << fmt::format("accel: rank {}: a background save_state failed: {}", process_index(), e.what())
              << std::endl;
  }
  try {
    end_training();
  } catch (const std::exception& e) {
    std::cerr << fmt::format("accel: rank {}: closing the trackers failed: {}", process_index(), e.what()) << std::endl;
  }
  // Last, so that the timeline holds a background save's write too.
  if (timeline_started_) {
    try {
      timeline::stop();
    } catch (const std::exception& e) {
      std::cerr << fmt::format("accel: rank {}: {}", process_index(), e.what()) << std::endl;
    }
  }
}

// On stderr, so that a program's own output (its results, a progress bar) stays clean on stdout.
void Accelerator::print_settings() const {
  std::cerr << fmt::format("accel: {} process(es), device {}, strategy {}, cpu_threads={} ({}), {}", num_processes(),
                           device().str(), strategy_->name(), settings_.cpu_threads.value,
                           settings_.cpu_threads.source, settings_.describe())
            << std::endl;
  std::cerr << "accel: precision policy: " << precision_->describe() << std::endl;
}

void Accelerator::init_trackers(const std::string& project_name) {
  init_trackers(project_name, nlohmann::json::object());
}

void Accelerator::init_trackers(const std::string& project_name, const nlohmann::json& config) {
  trackers_->init(project_name, config, project_.logging_dir.empty() ? project_.project_dir : project_.logging_dir);
}

void Accelerator::log(const nlohmann::json& values, std::optional<int64_t> step) {
  trackers_->log(values, step.value_or(completed_steps()));
}

void Accelerator::end_training() { trackers_->finish(); }

ProgressBar Accelerator::progress_bar(int64_t total, ProgressBarOptions options, int64_t start) const {
  options.enabled = options.enabled && is_main_process();
  // Under a launcher a rank's stdout is a pseudo-terminal of mpirun's (Open MPI gives one) whether or
  // not mpirun's own output is a terminal: \r redraws would end up in a log file. Plain lines there.
  if (!options.terminal && env_->process().launcher != "none") options.terminal = false;
  return ProgressBar(total, std::move(options), start);
}

AutocastGuard Accelerator::autocast() const { return precision_->autocast(); }

void Accelerator::weights_changed() { precision_->weights_changed(); }

void Accelerator::prepare_model(const std::shared_ptr<nn::Module>& model) {
  if (!strategy_->splits_layers())
    if (const std::string layer = nn::parallel::first_split_layer(*model); !layer.empty())
      throw Error(fmt::format("Accelerator::prepare: the model's '{}' is a tensor-parallel layer, but the strategy "
                              "is {}, which keeps every layer whole; set tp_size (ParallelismConfig, --tp_size) and "
                              "give prepare the whole model",
                              layer, strategy_->name()));
  const DeferredInit off(false);  // prepare's own tensors hold data, even inside a DeferredInit scope
  // Parameters built under DeferredInit: the strategy materialises its shard of them, or they are
  // materialised whole here (the values are the same either way), on the device: moving a meta
  // tensor costs nothing.
  if (!nn::first_meta_tensor(*model).empty()) model->to(device());
  if (strategy_->materializes_parameter_shards()) nn::materialize_buffers(*model);
  else nn::materialize(*model);
  strategy_->prepare_model(*model);
  precision_->prepare_model(*model);
  for (const auto& known : parts_.models)
    if (known.lock() == model) return;  // prepared again (one process allows it): checkpointed once
  parts_.models.push_back(model);
  if (timeline::enabled())
    timeline_hooks_.push_back(model->register_forward_scope([](nn::Module&, std::vector<std::shared_ptr<void>>& held) {
      held.push_back(std::make_shared<timeline::Span>("forward"));
    }));
}

const Reducer* Accelerator::reducer(const nn::Module& model) const {
  const auto* data_parallel = dynamic_cast<const DataParallel*>(strategy_.get());
  return data_parallel ? data_parallel->reducer(model) : nullptr;
}

void Accelerator::prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) {
  const DeferredInit off(false);
  precision_->prepare_optimizer(optimizer);
  for (const Tensor& p : optimizer->params())
    if (p.device() != device())
      throw Error(fmt::format("Accelerator::prepare: an optimizer parameter is on {} but the device is {}; prepare "
                              "the model together with its optimizer",
                              p.device().str(), device().str()));
  strategy_->prepare_optimizer(*optimizer);
  training_step_->add(optimizer);
  parts_.optimizers.push_back({optimizer, parameter_names(*optimizer)});
}

std::vector<std::string> Accelerator::parameter_names(const optim::Optimizer& optimizer) const {
  const auto names = prepared_parameter_names(parts_.models);
  std::vector<std::string> out;
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    const auto it = names.find(optimizer.params()[i].impl());
    out.push_back(it != names.end() ? it->second : fmt::format("param_{}", i));  // not in a prepared model
  }
  return out;
}

DataLoader Accelerator::prepare_data_loader(const DataLoader& loader) {
  const DataShard shard = strategy_->data_shard();
  DataLoader prepared = loader;
  prepared.shard({.rank = shard.rank,
                  .world_size = shard.world_size,
                  .even_batches = even_batches_,
                  .split_batches = split_batches_});
  prepared.set_device(device());
  prepared.set_gradient_state(gradient_state_);
  prepared.set_progress(std::make_shared<LoaderProgress>(*loader.progress()));
  parts_.loaders.push_back({prepared.progress(), prepared.global_batch_size()});
  return prepared;
}

void Accelerator::backward(const Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1)
    throw Error(fmt::format("Accelerator::backward: expected a one-element loss, got {}", loss.str()));
  const int64_t divisor = accumulation_.loss_divisor();
  const Tensor averaged = divisor > 1 ? loss / static_cast<double>(divisor) : loss;
  const Tensor scaled = precision_->scale_loss(averaged);
  const timeline::Span span("backward");
  strategy_->before_backward(accumulation_.backward_syncs());
  try {
    accel::backward(scaled);
  } catch (...) {
    strategy_->backward_failed();
    throw;
  }
  accumulation_.backward_done();
  strategy_->after_backward();
}

Accelerator::Scope Accelerator::accumulate() { return accumulation_.accumulate(); }

Accelerator::Scope Accelerator::no_sync() { return accumulation_.no_sync(); }

double Accelerator::clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  if (!(max_norm >= 0 && std::isfinite(max_norm)))
    throw Error(fmt::format("Accelerator::clip_grad_norm: max_norm must be finite and >= 0, got {}", max_norm));
  const bool inf = std::isinf(norm_type) && norm_type > 0;
  if (!inf && !(norm_type > 0 && std::isfinite(norm_type)))
    throw Error(fmt::format("Accelerator::clip_grad_norm: norm_type must be > 0 or inf, got {}", norm_type));
  if (precision_->scales_grads() && !accumulation_.sync_gradients())
    throw Error(fmt::format("Accelerator::clip_grad_norm: with mixed_precision={}, clip on the micro-step that "
                            "updates (sync_gradients() true): before it the accumulated grads are still multiplied "
                            "by the loss scale",
                            precision_->name()));
  precision_->unscale_and_check(training_step_->grads_to_unscale(params));
  const double total = strategy_->grad_norm(params, norm_type);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& g : strategy_->local_grads(params)) nograd::mul_(g, coefficient);
  }
  return total;
}

double Accelerator::clip_grad_norm(const nn::Module& model, double max_norm, double norm_type) {
  return clip_grad_norm(model.parameters(), max_norm, norm_type);
}

int64_t Accelerator::num_items(int64_t local_count, CallSite site) {
  if (local_count < 0)
    throw Error(fmt::format("Accelerator::num_items: local_count is {}, expected >= 0 (this rank's items in the "
                            "window)",
                            local_count));
  Communicator* comm = env_->comm();
  if (!comm) return local_count;
  // f64 travels over every backend and holds counts exactly up to 2^53.
  Tensor total = full({1}, static_cast<double>(local_count), DType::f64);
  comm->all_reduce(total, ReduceOp::sum, site);
  const int64_t world_sum = static_cast<int64_t>(total.item());
  // Ranks that replicate one data-parallel rank read its data and count its items again.
  const int64_t replicas = num_processes() / strategy_->data_shard().world_size;
  if (world_sum % replicas != 0)
    throw Error(fmt::format("Accelerator::num_items: the ranks' counts sum to {}, which the {} replicas of each "
                            "data-parallel rank cannot have given alike; every replica must pass the same count",
                            world_sum, replicas));
  return world_sum / replicas;
}

Tensor Accelerator::scale_sum_loss(const Tensor& sum_loss, int64_t num_items) const {
  if (!sum_loss.defined() || sum_loss.numel() != 1)
    throw Error(fmt::format("Accelerator::scale_sum_loss: expected a one-element loss, got {}", sum_loss.str()));
  if (num_items < 0)
    throw Error(fmt::format("Accelerator::scale_sum_loss: num_items is {}, expected >= 0 (from num_items())",
                            num_items));
  if (num_items == 0) return sum_loss * 0.0;
  const double data_parallel = strategy_->data_shard().world_size;
  const double divisor = static_cast<double>(accumulation_.loss_divisor());
  return sum_loss * (data_parallel * divisor / static_cast<double>(num_items));
}

void Accelerator::wait_for_everyone(CallSite site) {
  if (Communicator* comm = env_->comm()) comm->barrier(site);
}

namespace {
// The first ones run the scope; the others enter theirs once every first one has left its own.
Scope goes_first(Communicator* comm, bool first) {
  if (!comm) return Scope();
  if (!first) comm->barrier();  // wait for the first ones to leave their scope
  return Scope([comm, first] {
    if (first) comm->barrier();  // let the others in
  });
}
}  // namespace

Accelerator::Scope Accelerator::main_process_first() { return goes_first(env_->comm(), is_main_process()); }

Accelerator::Scope Accelerator::local_main_process_first() {
  return goes_first(env_->comm(), is_local_main_process());
}

std::string Accelerator::distributed_type() const {
  if (!use_distributed()) return "NO";
  return device().is_cuda() ? "MULTI_GPU" : "MULTI_CPU";
}

std::vector<nlohmann::json> Accelerator::gather_object(const nlohmann::json& object, CallSite site) {
  return accel::gather_object(env_->comm(), object, site);
}

std::vector<nlohmann::json> Accelerator::broadcast_object_list(const std::vector<nlohmann::json>& objects, int from,
                                                               CallSite site) {
  return accel::broadcast_object_list(env_->comm(), objects, from, site);
}

void Accelerator::check_same_structure(const char* op, const std::string& structure, const CallSite& site) {
  if (env_->comm() == nullptr) return;
  const std::vector<nlohmann::json> all = gather_object(structure, site);
  if (std::all_of(all.begin(), all.end(), [&](const nlohmann::json& s) { return s == all[0]; })) return;
  std::string each;
  for (size_t r = 0; r < all.size(); ++r) each += fmt::format("{}rank {} {}", r ? ", " : "", r, all[r].get<std::string>());
  throw Error(fmt::format("Accelerator::{}: the ranks passed structures of tensors that differ ({}); every rank must "
                          "pass the same keys and lengths",
                          op, each));
}

double Accelerator::max_over_ranks(double value, const CallSite& site) const {
  Tensor t = full({1}, value, DType::f64);
  if (env_->comm()) env_->comm()->all_reduce(t, ReduceOp::max, site);
  return t.item();
}

bool Accelerator::check_trigger(CallSite site) {
  const bool any = max_over_ranks(trigger_ ? 1.0 : 0.0, site) != 0;
  trigger_ = false;
  return any;
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir) {
  const nn::StateDict state = strategy_->model_state_dict(model);  // collective where sharded
  if (is_main_process()) {
    std::filesystem::create_directories(dir);
    checkpoint_io_->save((std::filesystem::path(dir) / "model.safetensors").string(), state, {{"format", "pt"}});
  }
  wait_for_everyone();
}

nn::LoadResult Accelerator::load_model(nn::Module& model, const std::string& path, bool strict) {
  const std::shared_ptr<const StateReader> state =
      std::filesystem::is_directory(path) ? open_checkpoint_model(path)
                                          : std::make_shared<SafetensorsReader>(std::vector<std::string>{path});
  // A model built under DeferredInit and not prepared yet takes the file as its init: prepare reads it.
  if (has_meta_tensors(model)) return load_into_deferred(model, state, path, strict);
  const nn::LoadResult result = strategy_->load_model_state(model, *state, strict);
  weights_changed();  // DDP's 16-bit weight copies are rounded again
  return result;
}

std::string Accelerator::save_state(const std::string& dir, const SaveStateOptions& options) {
  wait_for_save();
  std::filesystem::path target = dir;
  if (dir.empty()) {
    if (!project_.automatic_checkpoint_naming || project_.project_dir.empty())
      throw Error("Accelerator::save_state: no directory given; pass one, or set ProjectConfiguration's "
                  "project_dir and automatic_checkpoint_naming");
    target = next_checkpoint(project_.project_dir);
  }
  const timeline::Span span("save_state", "checkpoint");
  auto snapshot = std::make_shared<const CheckpointSnapshot>(
      take_checkpoint_snapshot(parts_, options, options.async ? async_snapshot_.get() : nullptr));
  const ProjectConfiguration project = project_;
  const bool prune = dir.empty() && is_main_process();
  auto write = [snapshot, target, project, prune](Communicator* comm) {
    const timeline::Span write_span("checkpoint write", "checkpoint");
    write_checkpoint(*snapshot, target, comm);
    if (prune) prune_checkpoints(project.project_dir, project.total_limit);
    if (comm) comm->barrier();
  };
  if (!options.async) {
    write(env_->comm());
    return target.string();
  }
  // The writer thread's barriers travel on a communicator of their own, apart from training's.
  if (env_->comm() && !checkpoint_comm_) checkpoint_comm_ = env_->comm()->dup();
  async_snapshot_ = snapshot;
  pending_save_ = std::async(std::launch::async, [write, comm = checkpoint_comm_] {
    timeline::name_thread("checkpoint writer");
    write(comm.get());
  });
  return target.string();
}

void Accelerator::wait_for_save() {
  if (pending_save_.valid()) pending_save_.get();  // rethrows a failed write
}

std::string Accelerator::load_state(const std::string& dir) {
  wait_for_save();
  std::filesystem::path source = dir;
  if (dir.empty() || dir == "latest") {
    if (project_.project_dir.empty())
      throw Error(fmt::format("Accelerator::load_state: '{}' needs ProjectConfiguration's project_dir, whose "
                              "checkpoints/ holds the automatic checkpoints",
                              dir.empty() ? "" : dir));
    const std::optional<std::filesystem::path> latest = latest_checkpoint(project_.project_dir);
    if (!latest)
      throw Error(fmt::format("Accelerator::load_state: no complete checkpoint in {}",
                              checkpoints_root(project_.project_dir).string()));
    source = *latest;
  }
  load_training_checkpoint(parts_, source);
  return source.string();
}

bool Accelerator::should_stop(CallSite site) {
  listen_for_preemption();
  if (stopping_) return true;
  if (!accumulation_.may_clear_grads()) return false;  // every rank is mid-window at the same micro-step
  // The highest rank+1 that got the signal (0: none), so that the message names one.
  const int signalled_rank = static_cast<int>(max_over_ranks(preemption_requested() ? process_index() + 1.0 : 0.0, site)) - 1;
  if (signalled_rank < 0) return false;
  stopping_ = true;
  const bool save = project_.automatic_checkpoint_naming && !project_.project_dir.empty();
  const std::string dir = save ? save_state() : "";
  print(fmt::format("accel: a preemption request (SIGTERM) reached rank {}: every rank stops after step {}{}", signalled_rank,
                    completed_steps(),
                    save ? fmt::format(", saved in {}", dir) : " (no ProjectConfiguration: nothing saved)"));
  // No rank exits before the line is out: mpirun ends the job, and may drop its output, once one does.
  wait_for_everyone();
  return true;
}

void Accelerator::save(const nn::StateDict& state, const std::string& file) {
  if (is_main_process()) {
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    save_safetensors(file, state, {{"format", "pt"}});
  }
  wait_for_everyone();
}

}  // namespace accel
