// Fp8Precision in one process: which Linears switch to FP8 (all but the first and last by default),
// the errors for a model with no Linear left, a history length of 0 (from code, the environment and
// the config file), the recipe's settings and their start-up line, and the scaling state's checkpoint
// form with its mismatch errors. The multi-rank amax agreement and resume are in tests/amp/test_fp8.cpp.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "accel.h"
#include "../error_of.h"
#include "runtime/config_file.h"

using namespace accel;

namespace {

struct TempConfig {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("accel_test_fp8_" + std::to_string(getpid()) + ".yaml");
  explicit TempConfig(const std::string& text) { std::ofstream(path) << text; }
  ~TempConfig() { std::filesystem::remove(path); }
};

AcceleratorOptions fp8_options(const TempConfig& config, fp8::RecipeOptions recipe = {}) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.config_file = config.path.string();
  o.mixed_precision = "fp8";
  o.fp8_recipe = recipe;
  return o;
}

// Linear(4, 8) -> Tanh -> {Linear(8, 8), Linear(8, 8)} -> Linear(8, 2): four Linears, one nested.
std::shared_ptr<nn::Sequential> make_model() {
  Generator gen(3);
  auto inner = std::make_shared<nn::Sequential>();
  inner->push_back(std::make_shared<nn::Linear>(8, 8, true, gen));
  inner->push_back(std::make_shared<nn::Linear>(8, 8, false, gen));
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 8, true, gen));
  model->push_back(std::make_shared<nn::Tanh>());
  model->push_back(inner);
  model->push_back(std::make_shared<nn::Linear>(8, 2, true, gen));
  return model;
}

nn::Linear& linear_at(nn::Module& model, const std::string& name) {
  for (const auto& [n, m] : model.named_modules())
    if (n == name) return dynamic_cast<nn::Linear&>(*m);
  throw Error("no module " + name);
}

Fp8Precision& fp8_of(Accelerator& a) { return dynamic_cast<Fp8Precision&>(a.precision()); }

using test_support::error_of;

}  // namespace

TEST_CASE("fp8: the first and last Linear in module order stay bf16 unless the recipe includes them") {
  const TempConfig config("num_processes: 1\n");
  {
    Accelerator a(fp8_options(config));
    auto model = make_model();
    a.prepare(model);
    CHECK(fp8_of(a).fp8_linear_names() == std::vector<std::string>{"2.0", "2.1"});
    CHECK_FALSE(linear_at(*model, "0").has_custom_forward());
    CHECK(linear_at(*model, "2.0").has_custom_forward());
    CHECK(linear_at(*model, "2.1").has_custom_forward());
    CHECK_FALSE(linear_at(*model, "3").has_custom_forward());
    a.prepare(model);  // prepared again: nothing switches twice
    CHECK(fp8_of(a).fp8_linear_names().size() == 2);
    // A second model's Linears are named as checkpoints name its parameters.
    auto second = make_model();
    a.prepare(second);
    CHECK(fp8_of(a).fp8_linear_names() == std::vector<std::string>{"2.0", "2.1", "model_1.2.0", "model_1.2.1"});
  }
  Accelerator all(fp8_options(config, {.include_first_last = true}));
  auto model = make_model();
  all.prepare(model);
  CHECK(fp8_of(all).fp8_linear_names() == std::vector<std::string>{"0", "2.0", "2.1", "3"});
}

TEST_CASE("fp8: a switched Linear computes fp8::linear with its own scaling, and the step updates the scales") {
  const TempConfig config("num_processes: 1\n");
  Accelerator a(fp8_options(config, {.amax_history_len = 4}));
  auto model = make_model();
  auto opt = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  a.prepare(model, opt);
  Generator gen(5);
  const Tensor x = randn({6, 8}, gen) * 3.0;
  nn::Linear& l = linear_at(*model, "2.0");
  // The same product by hand, with a scaling state of its own at the initial scales.
  auto scaling = std::make_shared<fp8::LinearScaling>(4);
  Tensor expected, got;
  {
    NoGradGuard no_grad;
    expected = fp8::linear(x, l.weight(), l.bias(), scaling, fp8_of(a).recipe(), DType::bf16);
    got = l.forward(x);
  }
  CHECK(got.dtype() == DType::bf16);
  CHECK(max(abs(to(got, DType::f32) - to(expected, DType::f32))).item() == 0.0);
  const fp8::ScalingState& input = fp8_of(a).scaling("2.0").roles[0];
  CHECK(input.history[0] == doctest::Approx(max(abs(x)).item()));
  CHECK(input.scale == 1.0f);
  // A training step: backward records the grad_output amax; the step rolls every history and sets
  // scale = 448 / amax for the e4m3 roles, 57344 / amax for e5m2's.
  opt->zero_grad();
  a.backward(mean(model->forward(randn({6, 4}, gen))));
  const fp8::LinearScaling& s = fp8_of(a).scaling("2.0");
  const float input_amax = s.roles[0].history[0], grad_amax = s.roles[2].history[0];
  CHECK(input_amax > 0.0f);
  CHECK(grad_amax > 0.0f);
  opt->step();
  CHECK(s.roles[0].history[0] == 0.0f);
  CHECK(s.roles[0].history[3] == input_amax);
  CHECK(s.roles[0].scale == 448.0f / input_amax);  // the forward of x above had the largest input
  CHECK(s.roles[2].scale == 57344.0f / grad_amax);
  CHECK(a.communicator() == nullptr);  // one process: no collective to agree on them
}

TEST_CASE("fp8: a model with no Linear left is an error naming the model and the rule") {
  const TempConfig config("num_processes: 1\n");
  Accelerator a(fp8_options(config));
  auto no_linear = std::make_shared<nn::Sequential>();
  no_linear->push_back(std::make_shared<nn::Tanh>());
  CHECK(error_of([&] { a.prepare(no_linear); }) ==
        "Accelerator::prepare: mixed_precision=fp8 with a model (Sequential) that has 0 Linears and its first and "
        "last Linear stay in bf16 (include_first_last false), so no Linear would run in fp8; use bf16 for a model "
        "without nn::Linear");
  Generator gen(1);
  auto two = std::make_shared<nn::Sequential>();
  two->push_back(std::make_shared<nn::Linear>(2, 2, true, gen));
  two->push_back(std::make_shared<nn::Linear>(2, 2, true, gen));
  CHECK(error_of([&] { a.prepare(two); }) ==
        "Accelerator::prepare: mixed_precision=fp8 with a model (Sequential) that has 2 Linears and its first and "
        "last Linear stay in bf16 (include_first_last false), so no Linear would run in fp8; set "
        "fp8_recipe.include_first_last or use bf16");
  Accelerator all(fp8_options(config, {.include_first_last = true}));
  CHECK(error_of([&] { all.prepare(no_linear); }) ==
        "Accelerator::prepare: mixed_precision=fp8 with a model (Sequential) that has 0 Linears, so no Linear would "
        "run in fp8; use bf16 for a model without nn::Linear");
  all.prepare(two);
  CHECK(fp8_of(all).fp8_linear_names().size() == 2);
}

TEST_CASE("fp8: a history length of 0 is an error naming the field and where it came from") {
  const TempConfig config("num_processes: 1\n");
  CHECK(error_of([&] { Accelerator a(fp8_options(config, {.amax_history_len = 0})); }) ==
        "Accelerator: fp8 amax_history_len '0' from code is not valid; expected an integer >= 1 (steps of amax kept)");
  AcceleratorOptions o = fp8_options(config);
  o.fp8_recipe.reset();
  CHECK(error_of([&] { resolve_settings(o, {{"ACCEL_FP8_AMAX_HISTORY_LEN", "0"}}); }) ==
        "Accelerator: fp8 amax_history_len '0' from environment ACCEL_FP8_AMAX_HISTORY_LEN is not valid; expected an "
        "integer >= 1 (steps of amax kept)");
  CHECK(error_of([&] { parse_config("mixed_precision: fp8\nfp8_amax_history_len: 0\n", "h.yaml"); }) ==
        "h.yaml:2: fp8_amax_history_len must be an integer >= 1, got '0'");
  CHECK_THROWS_WITH_AS(Fp8Precision(PrecisionPolicy::from_settings(MixedPrecision::fp8), {.amax_history_len = 0},
                                    nullptr),
                       "fp8 recipe: amax_history_len is 0, expected at least 1", Error);
}

TEST_CASE("fp8 recipe settings: code whole, else ACCEL_FP8_*, else the config file, else TE's defaults; on the "
          "start-up line") {
  const TempConfig config("mixed_precision: fp8\nfp8_margin: 1\nfp8_amax_history_len: 64\n");
  AcceleratorOptions o;
  o.config_file = config.path.string();
  EffectiveSettings s = resolve_settings(o, {});
  CHECK(s.mixed_precision.value == MixedPrecision::fp8);
  CHECK(s.fp8.recipe().margin == 1);
  CHECK(s.fp8.recipe().amax_history_len == 64);
  CHECK(s.fp8.amax_history_len.source == "config file");
  CHECK(s.fp8.allow_emulation.source == "default");
  CHECK(s.describe().find(", fp8_recipe=HYBRID, margin 1, amax max over 64 steps, first/last Linear in bf16 (config "
                          "file, default), config file ") != std::string::npos);
  s = resolve_settings(o, {{"ACCEL_FP8_FORMAT", "E4M3"},
                           {"ACCEL_FP8_AMAX_COMPUTE_ALGO", "most_recent"},
                           {"ACCEL_FP8_MARGIN", "2"},
                           {"ACCEL_FP8_INCLUDE_FIRST_LAST", "1"},
                           {"ACCEL_FP8_EMULATION", "1"}});
  const fp8::RecipeOptions r = s.fp8.recipe();
  CHECK(r.format == fp8::Format::e4m3);
  CHECK(r.amax_compute_algo == fp8::AmaxAlgorithm::most_recent);
  CHECK(r.margin == 2);
  CHECK(r.amax_history_len == 64);
  CHECK(r.include_first_last);
  CHECK(r.allow_emulation);
  CHECK(s.fp8.describe() ==
        "E4M3, margin 2, amax most_recent over 64 steps, first/last Linear in fp8, emulation allowed (environment "
        "ACCEL_FP8_MARGIN, config file, environment ACCEL_FP8_AMAX_COMPUTE_ALGO, environment ACCEL_FP8_FORMAT, "
        "environment ACCEL_FP8_INCLUDE_FIRST_LAST, environment ACCEL_FP8_EMULATION)");
  CHECK(error_of([&] { resolve_settings(o, {{"ACCEL_FP8_FORMAT", "E5M2"}}); }) ==
        "Accelerator: fp8 format 'E5M2' from environment ACCEL_FP8_FORMAT is not valid; expected HYBRID or E4M3");
  // Given in code, the recipe is used whole over the environment and the file.
  o.fp8_recipe = fp8::RecipeOptions{};
  s = resolve_settings(o, {{"ACCEL_FP8_MARGIN", "3"}});
  CHECK(s.fp8.recipe().margin == 0);
  CHECK(s.fp8.recipe().amax_history_len == 1024);
  CHECK(s.fp8.describe() == "HYBRID, margin 0, amax max over 1024 steps, first/last Linear in bf16 (code)");
  // Not fp8: the recipe in code is a contradiction; the line does not name it.
  o.mixed_precision = "bf16";
  o.print_settings = false;
  CHECK(resolve_settings(o, {}).describe().find("fp8_recipe") == std::string::npos);
  CHECK(error_of([&] { Accelerator a(o); }) ==
        "Accelerator: fp8_recipe options (from code) conflict with mixed_precision=bf16 (from code): only fp8 uses "
        "them; drop the fp8_recipe options or use fp8");
  // The config file's keys round-trip.
  ConfigFile c = parse_config("fp8_format: E4M3\nfp8_amax_compute_algo: most_recent\nfp8_include_first_last: true\n",
                              "f.yaml");
  CHECK(c.fp8_format == fp8::Format::e4m3);
  CHECK(c.fp8_amax_compute_algo == fp8::AmaxAlgorithm::most_recent);
  CHECK(c.fp8_include_first_last);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
}

TEST_CASE("fp8: the precision line names the recipe") {
  const TempConfig config("num_processes: 1\n");
  Accelerator a(fp8_options(config, {.margin = 1}));
  CHECK(a.precision().name() == "fp8");
  CHECK(a.precision().describe() ==
        "param f32, compute bf16, reduction f32, grad_comm f32, no loss scaler, fp8 Linears: HYBRID, margin 1, amax "
        "max over 1024 steps, first/last Linear in bf16");
}

TEST_CASE("fp8: the scaling state round-trips through state_dict; other Linears or history lengths are errors") {
  const TempConfig config("num_processes: 1\n");
  Accelerator a(fp8_options(config, {.amax_history_len = 8}));
  auto model = make_model();
  auto opt = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  a.prepare(model, opt);
  Generator gen(2);
  for (int step = 0; step < 3; ++step) {
    opt->zero_grad();
    a.backward(mean(model->forward(randn({4, 4}, gen))));
    opt->step();
  }
  const optim::StateDict state = a.precision().state_dict();
  REQUIRE(state.size() == 2 * 3 * 2);
  CHECK(state[0].first == "2.0.input.amax_history");
  CHECK(state[1].first == "2.0.input.scale");
  CHECK(state[5].first == "2.0.grad_output.scale");
  CHECK(state[0].second.numel() == 8);

  Accelerator b(fp8_options(config, {.amax_history_len = 8}));
  auto model_b = make_model();
  b.prepare(model_b);
  b.precision().load_state_dict(state);
  for (const char* name : {"2.0", "2.1"})
    for (int r = 0; r < fp8::kRoleCount; ++r) {
      CHECK(fp8_of(b).scaling(name).roles[r].history == fp8_of(a).scaling(name).roles[r].history);
      CHECK(fp8_of(b).scaling(name).roles[r].scale == fp8_of(a).scaling(name).roles[r].scale);
    }

  Accelerator longer(fp8_options(config, {.amax_history_len = 16}));
  auto model_c = make_model();
  longer.prepare(model_c);
  CHECK(error_of([&] { longer.precision().load_state_dict(state); }) ==
        "Fp8Precision::load_state_dict: '2.0.input.amax_history' holds 8 steps but this run's fp8 amax_history_len is "
        "16");
  Accelerator all(fp8_options(config, {.amax_history_len = 8, .include_first_last = true}));
  auto model_d = make_model();
  all.prepare(model_d);
  CHECK(error_of([&] { all.precision().load_state_dict(state); }) ==
        "Fp8Precision::load_state_dict: the state holds the scaling of FP8 Linears [2.0, 2.1] but this run has FP8 "
        "Linears [0, 2.0, 2.1, 3] (each with input, weight, grad_output.amax_history and .scale); prepare the same "
        "model with the same fp8 recipe");
  // A failed load changes nothing.
  CHECK(fp8_of(all).scaling("2.0").roles[0].scale == 1.0f);
}

TEST_CASE("fp8 on the CPU is the emulation itself: no device check refuses it") {
  CHECK_NOTHROW(check_fp8_device(Device::cpu(), false));
}
