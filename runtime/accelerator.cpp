// Accelerator: builds the Environment, Precision and Strategy from the settings, and routes each call
// of a training loop to them.
#include "runtime/accelerator.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "runtime/precision/make_precision.h"
#include "runtime/strategy/data_parallel.h"
#include "runtime/strategy/make_strategy.h"
#include "tensor/deterministic.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

Accelerator::Accelerator(AcceleratorOptions options)
    : settings_(resolve_settings(options, environment_variables())),
      env_(std::make_unique<Environment>(ProcessState::from_environment(), settings_)),
      precision_(make_precision(settings_, options.loss_scaler, env_->comm())),
      strategy_(make_strategy(*env_, settings_, precision_->policy())),
      accumulation_(settings_.gradient_accumulation_steps.value, gradient_state_),
      training_step_(std::make_shared<TrainingStep>(accumulation_, *precision_, *strategy_)),
      collectives_(*env_, gradient_state_),
      even_batches_(options.even_batches),
      split_batches_(options.split_batches) {
  set_deterministic_mode(settings_.deterministic.value);
  if (options.print_settings && is_main_process()) print_settings();
}

Accelerator::~Accelerator() = default;

void Accelerator::print_settings() const {
  std::cout << fmt::format("accel: {} process(es), device {}, {}", num_processes(), device().str(),
                           settings_.describe())
            << std::endl;
  std::cout << "accel: precision policy: " << precision_->describe() << std::endl;
}

AutocastGuard Accelerator::autocast() const { return precision_->autocast(); }

void Accelerator::weights_changed() { precision_->weights_changed(); }

void Accelerator::prepare_model(nn::Module& model) {
  strategy_->prepare_model(model);
  precision_->prepare_model(model);
}

const Reducer* Accelerator::reducer(const nn::Module& model) const {
  const auto* data_parallel = dynamic_cast<const DataParallel*>(strategy_.get());
  return data_parallel ? data_parallel->reducer(model) : nullptr;
}

void Accelerator::prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) {
  precision_->prepare_optimizer(optimizer);
  for (const Tensor& p : optimizer->params())
    if (p.device() != device())
      throw Error(fmt::format("Accelerator::prepare: an optimizer parameter is on {} but the device is {}; prepare "
                              "the model together with its optimizer",
                              p.device().str(), device().str()));
  strategy_->prepare_optimizer(*optimizer);
  training_step_->add(optimizer);
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
  return prepared;
}

void Accelerator::backward(const Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1)
    throw Error(fmt::format("Accelerator::backward: expected a one-element loss, got {}", loss.str()));
  const int64_t divisor = accumulation_.loss_divisor();
  const Tensor averaged = divisor > 1 ? loss / static_cast<double>(divisor) : loss;
  const Tensor scaled = precision_->scale_loss(averaged);
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

void Accelerator::wait_for_everyone() {
  if (Communicator* comm = env_->comm()) comm->barrier();
}

Accelerator::Scope Accelerator::main_process_first() {
  Communicator* comm = env_->comm();
  if (!comm) return Scope();
  if (!is_main_process()) comm->barrier();  // wait for the main process to leave its scope
  return Scope([this, comm] {
    if (is_main_process()) comm->barrier();  // let the others in
  });
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir) {
  const nn::StateDict state = strategy_->model_state_dict(model);  // collective where sharded
  if (is_main_process()) {
    std::filesystem::create_directories(dir);
    checkpoint_io_->save((std::filesystem::path(dir) / "model.safetensors").string(), state, {{"format", "pt"}});
  }
  wait_for_everyone();
}

}  // namespace accel
