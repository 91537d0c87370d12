// Fp8Precision: which Linears switch to FP8, the once-per-step amax agreement and scale update, the
// scaling state's checkpoint form, and the device check.
#include "runtime/precision/fp8_precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "accel_config.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#if ACCEL_WITH_CUDA
#include "tensor/cuda/device.h"
#endif

namespace accel {

namespace {

constexpr std::array<const char*, fp8::kRoleCount> kRoleNames{"input", "weight", "grad_output"};

constexpr std::array<const char*, 2> kPartNames{"amax_history", "scale"};

fp8::Role role_at(int i) { return static_cast<fp8::Role>(i); }

// "<linear>.<role>", or "<role>" for a model that is one Linear itself (its module path is "").
std::string key_of(const std::string& linear, const char* role) {
  return linear.empty() ? role : fmt::format("{}.{}", linear, role);
}

// The Linear a state key belongs to, or the key itself when it is no "<linear>.<role>.<part>" key.
std::string linear_of(const std::string& key) {
  for (const char* role : kRoleNames)
    for (const char* part : kPartNames) {
      const std::string suffix = fmt::format("{}.{}", role, part);
      if (key == suffix) return "";
      if (key.size() > suffix.size() && key.ends_with("." + suffix)) return key.substr(0, key.size() - suffix.size() - 1);
    }
  return key;
}

}  // namespace

Fp8Precision::Fp8Precision(const PrecisionPolicy& policy, const fp8::RecipeOptions& recipe, Communicator* comm)
    : HalfPrecision(policy), recipe_(recipe), comm_(comm) {
  if (policy.compute != DType::bf16)
    throw Error(fmt::format("Fp8Precision: the compute dtype outside the FP8 Linears must be bf16, got {}",
                            dtype_name(policy.compute)));
  recipe_.validate();
}

std::string Fp8Precision::describe() const {
  return fmt::format("{}, no loss scaler, fp8 Linears: {}", policy().describe(), recipe_.describe());
}

void Fp8Precision::prepare_model(nn::Module& model) {
  HalfPrecision::prepare_model(model);
  if (fp8_models_.count(&model)) return;  // prepared again: its Linears are switched already
  // Module order is named_modules' pre-order: a parent before its children, children as registered.
  std::vector<std::pair<std::string, nn::Linear*>> found;
  for (const auto& [name, module] : model.named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(module)) found.emplace_back(name, linear);
  const size_t total = found.size();
  if (!recipe_.include_first_last && !found.empty()) {
    found.pop_back();
    if (!found.empty()) found.erase(found.begin());
  }
  if (found.empty())
    throw Error(fmt::format(
        "Accelerator::prepare: mixed_precision=fp8 with a model ({}) that has {} Linear{}{}, so no Linear would run in "
        "fp8; {}",
        model.type_name(), total, total == 1 ? "" : "s",
        recipe_.include_first_last ? "" : " and its first and last Linear stay in bf16 (include_first_last false)",
        total == 0 ? "use bf16 for a model without nn::Linear" : "set fp8_recipe.include_first_last or use bf16"));
  fp8_models_.insert(&model);
  const std::string model_prefix = prepared_models_ == 0 ? "" : fmt::format("model_{}.", prepared_models_);
  ++prepared_models_;
  for (const auto& [name, linear] : found) {
    auto scaling = std::make_shared<fp8::LinearScaling>(recipe_.amax_history_len);
    std::weak_ptr<fp8::LinearScaling> weak = scaling;
    // The forward holds the scaling weakly: once this precision is gone (its Accelerator ended or
    // freed its memory) the Linear multiplies in accel::linear again.
    linear->set_forward(
        [weak, recipe = recipe_, out = policy().compute](const Tensor& x, const Tensor& w, const Tensor& b) {
          if (const auto held = weak.lock()) return fp8::linear(x, w, b, held, recipe, out);
          return accel::linear(x, w, b);
        });
    linears_.push_back({model_prefix + name, std::move(scaling)});
  }
}

void Fp8Precision::prepare_optimizer(const std::shared_ptr<optim::Optimizer>& optimizer) {
  for (const auto& weak : optimizers_)
    if (!weak.expired())
      throw Error("Accelerator::prepare: with mixed_precision=fp8 one optimizer can be prepared (the FP8 scales are "
                  "updated once per optimizer step); this is a second one");
  optimizers_.push_back(optimizer);
}

bool Fp8Precision::finish_step(bool found_inf) {
  NoGradGuard no_grad;
  if (comm_ && comm_->size() > 1 && !linears_.empty()) {
    // One max all-reduce of every role's amax of this step (NaN already +inf), so every rank derives
    // the same scales.
    std::vector<float> amaxes;
    amaxes.reserve(linears_.size() * fp8::kRoleCount);
    for (const Fp8Linear& l : linears_)
      for (const fp8::ScalingState& s : l.scaling->roles) amaxes.push_back(s.history[0]);
    Tensor agreed = from_vector(amaxes, comm_->device());
    comm_->all_reduce(agreed, ReduceOp::max, "fp8 amaxes");
    amaxes = agreed.to_vector<float>();
    size_t i = 0;
    for (Fp8Linear& l : linears_)
      for (fp8::ScalingState& s : l.scaling->roles) s.history[0] = amaxes[i++];
  }
  for (Fp8Linear& l : linears_)
    for (int r = 0; r < fp8::kRoleCount; ++r)
      l.scaling->roles[r].update(recipe_, fp8::fp8_max(recipe_.dtype_of(role_at(r))));
  return !found_inf;
}

optim::StateDict Fp8Precision::state_dict() const {
  optim::StateDict out;
  for (const Fp8Linear& l : linears_)
    for (int r = 0; r < fp8::kRoleCount; ++r) {
      const fp8::ScalingState& s = l.scaling->roles[r];
      const std::string key = key_of(l.name, kRoleNames[r]);
      out.emplace_back(key + ".amax_history",
                       from_vector(s.history, {static_cast<int64_t>(s.history.size())}));
      out.emplace_back(key + ".scale", from_vector(std::vector<float>{s.scale}, {1}));
    }
  return out;
}

void Fp8Precision::load_state_dict(const optim::StateDict& state) {
  std::map<std::string, Tensor> by_key(state.begin(), state.end());
  std::set<std::string> theirs;
  for (const auto& entry : state) theirs.insert(linear_of(entry.first));
  std::set<std::string> ours;
  for (const Fp8Linear& l : linears_) ours.insert(l.name);
  bool complete = theirs == ours;
  for (const Fp8Linear& l : linears_)
    for (const char* role : kRoleNames)
      for (const char* part : kPartNames)
        complete = complete && by_key.count(fmt::format("{}.{}", key_of(l.name, role), part)) == 1;
  if (!complete)
    throw Error(fmt::format("Fp8Precision::load_state_dict: the state holds the scaling of FP8 Linears [{}] but this "
                            "run has FP8 Linears [{}] (each with {}.amax_history and .scale); prepare the same model "
                            "with the same fp8 recipe",
                            fmt::join(theirs, ", "), fmt::join(ours, ", "), fmt::join(kRoleNames, ", ")));
  for (const Fp8Linear& l : linears_)
    for (const char* role : kRoleNames) {
      const std::string key = key_of(l.name, role);
      const Tensor& history = by_key[key + ".amax_history"];
      if (history.numel() != recipe_.amax_history_len)
        throw Error(fmt::format("Fp8Precision::load_state_dict: '{}.amax_history' holds {} steps but this run's fp8 "
                                "amax_history_len is {}",
                                key, history.numel(), recipe_.amax_history_len));
      if (by_key[key + ".scale"].numel() != 1)
        throw Error(fmt::format("Fp8Precision::load_state_dict: '{}.scale' has {} elements, expected 1", key,
                                by_key[key + ".scale"].numel()));
    }
  for (Fp8Linear& l : linears_)
    for (int r = 0; r < fp8::kRoleCount; ++r) {
      const std::string key = key_of(l.name, kRoleNames[r]);
      fp8::ScalingState& s = l.scaling->roles[r];
      s.history = to_dtype(by_key[key + ".amax_history"], DType::f32).to_vector<float>();
      s.scale = to_dtype(by_key[key + ".scale"], DType::f32).to_vector<float>()[0];
    }
}

std::vector<std::string> Fp8Precision::fp8_linear_names() const {
  std::vector<std::string> names;
  for (const Fp8Linear& l : linears_) names.push_back(l.name);
  return names;
}

const fp8::LinearScaling& Fp8Precision::scaling(const std::string& linear_name) const {
  for (const Fp8Linear& l : linears_)
    if (l.name == linear_name) return *l.scaling;
  throw Error(fmt::format("Fp8Precision::scaling: no FP8 Linear '{}'; the FP8 Linears are [{}]", linear_name,
                          fmt::join(fp8_linear_names(), ", ")));
}

void check_fp8_device(Device device, bool allow_emulation) {
  if (!device.is_cuda() || allow_emulation) return;
#if ACCEL_WITH_CUDA
  const cuda::DeviceProperties p = cuda::device_properties(device.index);
  if (p.major * 10 + p.minor < 89)
    throw Error(fmt::format("Accelerator: mixed_precision=fp8 needs a GPU of compute capability 8.9 or more (Ada, "
                            "Hopper) for its FP8 GEMMs, but {} ({}) has {}.{}; set fp8_recipe.allow_emulation "
                            "(ACCEL_FP8_EMULATION=1) to emulate FP8 there, or use bf16",
                            device.str(), p.name, p.major, p.minor));
#else
  throw_no_cuda("Accelerator (mixed_precision=fp8)", device);
#endif
}

}  // namespace accel
