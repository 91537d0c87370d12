// Settings resolution: code, then environment, then config file, then default, each checked.
#include "runtime/settings.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "runtime/config_file.h"
#include "runtime/process_state.h"

namespace accel {

namespace {

using Env = EnvironmentVariables;

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

bool is_positive_number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    return used == s.size() && std::isfinite(v) && v > 0;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string EffectiveSettings::describe() const {
  return fmt::format(
      "mixed_precision={} ({}), grad_comm_dtype={} ({}), cpu={} ({}), gradient_accumulation_steps={} ({}), "
      "backend={} ({}), bucket_cap_mb={} ({}){}",
      mixed_precision.value, mixed_precision.source, grad_comm_dtype.value, grad_comm_dtype.source, cpu.value,
      cpu.source, gradient_accumulation_steps.value, gradient_accumulation_steps.source, backend.value, backend.source, bucket_cap_mb.value, bucket_cap_mb.source,
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
  s.grad_comm_dtype = pick(
      "grad_comm_dtype", "ACCEL_GRAD_COMM_DTYPE", o.grad_comm_dtype, env, std::nullopt, "f32",
      [](const std::string& v) { return v == "f32" || v == "compute" || v == "f16" || v == "bf16"; },
      "f32, compute, f16 or bf16");
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
  s.backend = pick(
      "backend", "ACCEL_BACKEND", o.backend, env, from_file([](const ConfigFile& c) { return c.backend; }), "auto",
      [](const std::string& v) { return v == "auto" || v == "mpi" || v == "ring" || v == "nccl"; },
      "auto, mpi, ring or nccl");
  // Not a config file key: a tuning knob, set in code or for one run through the environment.
  s.bucket_cap_mb = pick(
      "bucket_cap_mb", "ACCEL_BUCKET_CAP_MB",
      o.bucket_cap_mb ? std::optional<std::string>(fmt::format("{}", *o.bucket_cap_mb)) : std::nullopt, env,
      std::nullopt, "25", is_positive_number, "a number of MiB > 0");
  return s;
}

}  // namespace accel
