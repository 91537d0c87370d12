// Accelerator: settings resolution, device choice, and the preparation of models, optimizers and
// data loaders for this process.
#include "runtime/accelerator.h"

#include <fmt/format.h>

#include <filesystem>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "runtime/config_file.h"
#include "runtime/safetensors.h"

extern char** environ;

namespace accel {

namespace {

using Env = std::map<std::string, std::string>;

Env process_environment() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? std::nullopt : std::optional<std::string>(it->second);
}

// code, then environment, then config file, then default; checks the value against `valid`.
Setting pick(const char* name, const char* env_name, const std::optional<std::string>& code, const Env& env,
             const std::optional<std::string>& file_value, const std::string& fallback,
             const std::function<bool(const std::string&)>& valid, const char* expected) {
  Setting s;
  if (code) {
    s = {*code, "code"};
  } else if (auto v = lookup(env, env_name)) {
    s = {*v, fmt::format("environment {}", env_name)};
  } else if (file_value) {
    s = {*file_value, "config file"};
  } else {
    s = {fallback, "default"};
  }
  if (!valid(s.value))
    throw Error(fmt::format("Accelerator: {} '{}' from {} is not valid; expected {}", name, s.value, s.source, expected));
  return s;
}

bool is_positive_int(const std::string& s) {
  try {
    size_t used = 0;
    return std::stoi(s, &used) >= 1 && used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string EffectiveSettings::describe() const {
  return fmt::format("mixed_precision={} ({}), cpu={} ({}), gradient_accumulation_steps={} ({}){}",
                     mixed_precision.value, mixed_precision.source, cpu.value, cpu.source,
                     gradient_accumulation_steps.value, gradient_accumulation_steps.source,
                     config_path.empty() ? "" : fmt::format(", config file {}", config_path));
}

EffectiveSettings resolve_settings(const AcceleratorOptions& o, const Env& env) {
  std::optional<ConfigFile> file;
  std::string path;
  if (o.config_file) {
    path = *o.config_file;
    file = load_config(path);  // asked for by name: a missing file is an error
  } else {
    path = lookup(env, "ACCEL_CONFIG_FILE").value_or(default_config_path());
    if (std::filesystem::exists(path)) file = load_config(path);
  }
  EffectiveSettings s;
  if (file) s.config_path = path;
  auto from_file = [&](auto member) -> std::optional<std::string> {
    if (!file) return std::nullopt;
    return member(*file);
  };
  s.mixed_precision = pick(
      "mixed_precision", "ACCEL_MIXED_PRECISION", o.mixed_precision, env,
      from_file([](const ConfigFile& c) { return c.mixed_precision; }), "no",
      [](const std::string& v) { return v == "no" || v == "fp16" || v == "bf16"; }, "no, fp16 or bf16");
  s.cpu = pick(
      "cpu", "ACCEL_USE_CPU", o.cpu ? std::optional<std::string>(*o.cpu ? "true" : "false") : std::nullopt, env,
      from_file([](const ConfigFile& c) { return std::string(c.use_cpu ? "true" : "false"); }), "false",
      [](const std::string& v) { return v == "true" || v == "false"; }, "true or false");
  s.gradient_accumulation_steps = pick(
      "gradient_accumulation_steps", "ACCEL_GRADIENT_ACCUMULATION_STEPS",
      o.gradient_accumulation_steps ? std::optional<std::string>(std::to_string(*o.gradient_accumulation_steps))
                                    : std::nullopt,
      env, from_file([](const ConfigFile& c) { return std::to_string(c.gradient_accumulation_steps); }), "1",
      is_positive_int, "an integer >= 1");
  return s;
}

Accelerator::Accelerator(AcceleratorOptions options) {
  const Env env = process_environment();
  state_ = ProcessState::from_environment(env);
  settings_ = resolve_settings(options, env);
  accumulation_steps_ = std::stoi(settings_.gradient_accumulation_steps.value);
  if (state_.world_size > 1)
    throw Error(fmt::format("Accelerator: launched as rank {} of {}, but this build runs one process only "
                            "(no communicator backend)",
                            state_.rank, state_.world_size));
  if (settings_.mixed_precision.value != "no")
    throw Error(fmt::format("Accelerator: mixed_precision={} (from {}) is not available in this build; use no",
                            settings_.mixed_precision.value, settings_.mixed_precision.source));
  const bool use_cpu = settings_.cpu.value == "true";
  const int gpus = use_cpu ? 0 : cuda_device_count();
  device_ = gpus > 0 ? Device::cuda(state_.local_rank % gpus) : Device::cpu();
  if (options.print_settings && is_main_process())
    std::cout << fmt::format("accel: {} process(es), device {}, {}", state_.world_size, device_.str(),
                             settings_.describe())
              << std::endl;
}

Accelerator::~Accelerator() = default;

void Accelerator::prepare_model(nn::Module& model) { model.to(device_); }

void Accelerator::prepare_optimizer(optim::Optimizer& optimizer) {
  for (const Tensor& p : optimizer.params())
    if (p.device() != device_)
      throw Error(fmt::format("Accelerator::prepare: an optimizer parameter is on {} but the device is {}; prepare "
                              "the model together with its optimizer",
                              p.device().str(), device_.str()));
}

DataLoader Accelerator::prepare_data_loader(const DataLoader& loader) {
  DataLoader prepared = loader;
  prepared.shard({.rank = state_.rank, .world_size = state_.world_size});
  prepared.set_device(device_);
  return prepared;
}

void Accelerator::backward(const Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1)
    throw Error(fmt::format("Accelerator::backward: expected a one-element loss, got {}", loss.str()));
  accel::backward(accumulation_steps_ > 1 ? loss / static_cast<double>(accumulation_steps_) : loss);
}

void Accelerator::wait_for_everyone() {}

void Accelerator::save_model(const nn::Module& model, const std::string& dir) {
  if (is_main_process()) {
    std::filesystem::create_directories(dir);
    save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), model.state_dict(),
                     {{"format", "pt"}});
  }
  wait_for_everyone();
}

}  // namespace accel
