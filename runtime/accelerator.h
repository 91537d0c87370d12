// Accelerator: the facade a training loop talks to. It reads the launch settings, picks this
// process's device, prepares the model, optimizer and data for it, and runs backward.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "runtime/data_loader.h"
#include "runtime/process_state.h"
#include "tensor/tensor.h"

namespace accel {

// Settings given in code. Each one left empty falls back to its ACCEL_* environment variable (set by
// `accel launch`), then to the config file, then to the default.
struct AcceleratorOptions {
  std::optional<std::string> mixed_precision;      // "no", "fp16" or "bf16"   (ACCEL_MIXED_PRECISION)
  std::optional<bool> cpu;                         // train on the CPU even with GPUs   (ACCEL_USE_CPU)
  std::optional<int> gradient_accumulation_steps;  // (ACCEL_GRADIENT_ACCUMULATION_STEPS)
  std::optional<std::string> config_file;          // (ACCEL_CONFIG_FILE, else the default path)
  // Print the effective settings once on the main process at start.
  bool print_settings = true;
};

// One resolved setting and where it came from ("code", "environment", "config file", "default").
struct Setting {
  std::string value;
  std::string source;
};

struct EffectiveSettings {
  Setting mixed_precision, cpu, gradient_accumulation_steps;
  std::string config_path;  // empty when no config file was read
  std::string describe() const;  // one line for the start-up print
};

// Resolves each setting: code, then environment, then config file, then default.
EffectiveSettings resolve_settings(const AcceleratorOptions& options, const std::map<std::string, std::string>& env);

class Accelerator {
 public:
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  Device device() const { return device_; }
  int process_index() const { return state_.rank; }
  int local_process_index() const { return state_.local_rank; }
  int num_processes() const { return state_.world_size; }
  bool is_main_process() const { return state_.is_main_process(); }
  bool is_local_main_process() const { return state_.is_local_main_process(); }
  const EffectiveSettings& settings() const { return settings_; }
  int gradient_accumulation_steps() const { return accumulation_steps_; }

  // Prepares each object for this process and returns them in order, so that
  //   auto [model, optimizer, data] = accelerator.prepare(model, optimizer, loader);
  // Models and optimizers are shared_ptrs (returned as the same objects, ready); DataLoaders are
  // returned as sharded copies that yield batches on this process's device.
  template <class... Objects>
  auto prepare(Objects&&... objects) {
    return std::tuple{prepare_one(std::forward<Objects>(objects))...};
  }

  // Use instead of loss.backward(): scales the loss as the precision policy and accumulation need.
  void backward(const Tensor& loss);

  // Prints its arguments separated by spaces, on the main process only.
  template <class... Args>
  void print(const Args&... args) const {
    if (!is_main_process()) return;
    std::ostringstream line;
    bool first = true;
    ((line << (first ? "" : " ") << args, first = false), ...);
    std::cout << line.str() << std::endl;
  }

  // Blocks until every process reaches it.
  void wait_for_everyone();
  // The model the user built (prepare does not wrap it).
  template <class M>
  std::shared_ptr<M> unwrap_model(const std::shared_ptr<M>& model) const {
    return model;
  }
  // Writes dir/model.safetensors with the model's state_dict (main process only), creating dir.
  void save_model(const nn::Module& model, const std::string& dir);

 private:
  template <class T>
  struct IsSharedPtr : std::false_type {};
  template <class T>
  struct IsSharedPtr<std::shared_ptr<T>> : std::true_type {
    using element = T;
  };

  template <class T>
  auto prepare_one(T&& object) {
    using D = std::decay_t<T>;
    if constexpr (std::is_same_v<D, DataLoader>) {
      return prepare_data_loader(object);
    } else if constexpr (IsSharedPtr<D>::value && std::is_base_of_v<nn::Module, typename IsSharedPtr<D>::element>) {
      prepare_model(*object);
      return object;
    } else if constexpr (IsSharedPtr<D>::value &&
                         std::is_base_of_v<optim::Optimizer, typename IsSharedPtr<D>::element>) {
      prepare_optimizer(*object);
      return object;
    } else {
      static_assert(sizeof(D) == 0,
                    "Accelerator::prepare takes shared_ptrs to nn::Module or optim::Optimizer, and DataLoaders");
    }
  }

  void prepare_model(nn::Module& model);
  void prepare_optimizer(optim::Optimizer& optimizer);
  DataLoader prepare_data_loader(const DataLoader& loader);

  ProcessState state_;
  EffectiveSettings settings_;
  Device device_ = Device::cpu();
  int accumulation_steps_ = 1;
};

}  // namespace accel
