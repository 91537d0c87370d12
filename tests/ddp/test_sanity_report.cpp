// The first-step sanity report (AcceleratorOptions::check): on every rank count, it names a parameter
// left out of the optimizer, a frozen layer, and a rank whose gradients were perturbed, and says
// nothing about a clean model; it waits for the step that ends an accumulation window.
#include <algorithm>

#include "support.h"
#include "tensor/nograd/elementwise.h"

namespace test {

namespace {

struct StepSpec {
  // Which parameters of the MLP ("0.weight", ...) are frozen (requires_grad false) before the
  // optimizer is built (which must then be built without them), and which it is built without.
  std::vector<std::string> frozen = {}, left_out = {};
  // Frozen once the optimizer holds them.
  std::vector<std::string> frozen_after_optimizer = {};
  // Called after each backward, before the step.
  std::function<void(Accelerator&, nn::Module&)> after_backward = [](Accelerator&, nn::Module&) {};
  AcceleratorOptions options = test::options();
  int micro_steps = 1;
  // A leaf of no model that the optimizer holds too.
  bool stray_optimizer_parameter = false;
};

struct StepResult {
  std::vector<std::string> findings, lines;
  bool finished_before_last_micro_step = false;
};

bool named_in(const std::string& name, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The MLP trained for spec.micro_steps micro-steps with the report on; what it said.
StepResult first_step(StepSpec spec) {
  spec.options.check = true;
  Accelerator accelerator(spec.options);
  auto model = make_mlp(7);
  std::vector<Tensor> params;
  for (auto [name, p] : model->named_parameters()) {
    if (named_in(name, spec.frozen)) p.requires_grad_(false);
    if (!named_in(name, spec.left_out) && !named_in(name, spec.frozen)) params.push_back(p);
  }
  if (spec.stray_optimizer_parameter) params.push_back(zeros({3}).requires_grad_());
  auto optimizer = make_optimizer("sgd", params);
  for (auto [name, p] : model->named_parameters())
    if (named_in(name, spec.frozen_after_optimizer)) p.requires_grad_(false);
  accelerator.prepare(model, optimizer);
  REQUIRE(accelerator.sanity_report() != nullptr);
  Generator gen(99 + static_cast<uint64_t>(accelerator.process_index()));
  StepResult result;
  for (int i = 0; i < spec.micro_steps; ++i) {
    if (i == spec.micro_steps - 1) result.finished_before_last_micro_step = accelerator.sanity_report()->finished();
    auto accumulate = accelerator.accumulate(model);
    const Tensor x = randn({16, 8}, gen), y = randn({16, 4}, gen);
    accelerator.backward(nn::mse_loss(model->forward(x), y));
    spec.after_backward(accelerator, *model);
    optimizer->step();
    optimizer->zero_grad();
  }
  CHECK(accelerator.sanity_report()->finished());
  result.findings = accelerator.sanity_report()->findings();
  result.lines = accelerator.sanity_report()->lines();
  return result;
}

bool has_line(const std::vector<std::string>& lines, const std::string& text) {
  return std::find(lines.begin(), lines.end(), text) != lines.end();
}

std::string joined(const std::vector<std::string>& lines) { return fmt::format("{}", fmt::join(lines, "\n")); }

}  // namespace

TEST_CASE("sanity report: a clean model gives no finding, the dtypes and a summary") {
  const StepResult r = first_step({});
  INFO(joined(r.lines));
  CHECK(r.findings.empty());
  CHECK(has_line(r.lines, "dtypes: parameters f32, gradients f32 (all-reduced in f32), matmuls f32 (the precision "
                          "policy's compute dtype; mixed precision no)"));
  CHECK(has_line(r.lines, "optimizer 0 (SGD): state f32"));
  CHECK(r.lines.back().rfind("first optimizer step checked (6 parameters, 1 optimizer(s), strategy ", 0) == 0);
  CHECK(r.lines.back().find("): no findings") != std::string::npos);
}

TEST_CASE("sanity report: a parameter left out of the optimizer, by name") {
  const StepResult r = first_step({.left_out = {"4.bias"}});
  INFO(joined(r.lines));
  CHECK(has_line(r.findings, "4.bias is in no prepared optimizer: it requires a gradient but nothing updates it"));
  CHECK(has_line(r.findings, "4.bias did not change in the optimizer step (no optimizer holds it)"));
  CHECK(r.findings.size() == 2);
}

TEST_CASE("sanity report: an optimizer parameter in no prepared model") {
  const StepResult r = first_step({.stray_optimizer_parameter = true});
  INFO(joined(r.lines));
  CHECK(has_line(r.findings, "parameter 6 of optimizer 0 (Tensor(f32, cpu, [3])) is in no prepared model"));
  CHECK(has_line(r.findings, "optimizer parameter 6 got no gradient (it took no part in the loss)"));
  CHECK(has_line(r.findings, "optimizer parameter 6 did not change in the optimizer step (no gradient)"));
  CHECK(r.findings.size() == 3);
}

TEST_CASE("sanity report: bf16 names the compute dtype; the masters, their grads and the state stay f32") {
  StepSpec spec;
  spec.options.mixed_precision = "bf16";
  const StepResult r = first_step(spec);
  INFO(joined(r.lines));
  CHECK(r.findings.empty());
  CHECK(has_line(r.lines, "dtypes: parameters f32, gradients f32 (all-reduced in f32), matmuls bf16 (the precision "
                          "policy's compute dtype; mixed precision bf16)"));
  CHECK(has_line(r.lines, "optimizer 0 (SGD): state f32"));
}

TEST_CASE("sanity report: two models with an optimizer each are checked at each one's first step, named model_1.") {
  AcceleratorOptions o = options();
  o.check = true;
  Accelerator accelerator(o);
  auto first = make_mlp(1), second = make_mlp(2);
  std::vector<Tensor> second_params = second->parameters();
  second_params.pop_back();  // 4.bias of the second model: no optimizer holds it
  auto first_opt = make_optimizer("sgd", first->parameters()), second_opt = make_optimizer("sgd", second_params);
  accelerator.prepare(first, second, first_opt, second_opt);
  Generator gen(5);
  const Tensor x = randn({16, 8}, gen), y = randn({16, 4}, gen);
  accelerator.backward(nn::mse_loss(first->forward(x), y) + nn::mse_loss(second->forward(x), y));
  first_opt->step();
  const SanityReport& report = *accelerator.sanity_report();
  CHECK_FALSE(report.finished());  // the second optimizer has not stepped yet
  second_opt->step();
  INFO(joined(report.lines()));
  CHECK(report.finished());
  CHECK(report.findings() ==
        std::vector<std::string>{"model_1.4.bias is in no prepared optimizer: it requires a gradient but nothing updates it",
                                 "model_1.4.bias did not change in the optimizer step (no optimizer holds it)"});
  CHECK(has_line(report.lines(), "optimizer 1 (SGD): state f32"));
  CHECK(report.lines().back().rfind("first optimizer step checked (12 parameters, 2 optimizer(s)", 0) == 0);
}

TEST_CASE("sanity report: a frozen layer got no gradient and did not change, by name") {
  // Frozen before the optimizer was built (so left out of it, as Optimizer requires), and frozen after.
  for (const bool in_optimizer : {false, true}) {
    StepSpec spec;
    (in_optimizer ? spec.frozen_after_optimizer : spec.frozen) = {"0.weight", "0.bias"};
    const StepResult r = first_step(spec);
    INFO(joined(r.lines));
    for (const std::string name : {"0.weight", "0.bias"}) {
      CHECK(has_line(r.findings, name + " got no gradient (requires_grad is false)"));
      CHECK(has_line(r.findings, name + " did not change in the optimizer step " +
                                     (in_optimizer ? "(frozen)" : "(frozen, and no optimizer holds it)")));
    }
    CHECK(r.findings.size() == 4);  // a frozen parameter is not "in no prepared optimizer"
  }
}

TEST_CASE("sanity report: a rank whose gradient was perturbed after backward is named with the parameter") {
  const StepResult r = first_step({.after_backward = [](Accelerator& accelerator, nn::Module& model) {
    if (accelerator.process_index() != 1) return;
    for (auto [name, p] : model.named_parameters())
      if (name == "2.weight") nograd::add_(p.grad(), ones(p.shape()));
  }});
  INFO(joined(r.lines));
  const int n = world()->size();
  if (n == 1) {
    CHECK(r.findings.empty());  // nothing to compare with, and rank 1 does not exist
    return;
  }
  std::string others = n == 2 ? "rank 0" : "ranks 0";
  for (int rank = 2; rank < n; ++rank) others += fmt::format(",{}", rank);
  CHECK(has_line(r.findings, "the gradient of 2.weight differs across data-parallel ranks: rank 1 differs from " + others));
  CHECK(r.findings.size() == 1);
}

TEST_CASE("sanity report: it waits for the step that ends an accumulation window") {
  StepSpec spec{.micro_steps = 2};
  spec.options.gradient_accumulation_steps = 2;
  const StepResult r = first_step(spec);
  INFO(joined(r.lines));
  CHECK_FALSE(r.finished_before_last_micro_step);
  CHECK(r.findings.empty());
}

TEST_CASE("sanity report under the ZeRO stages: no finding on a clean model; the gradient hash check does not apply") {
  for (const int stage : {1, 2, 3}) {
    StepSpec spec;
    DeepSpeedPlugin zero;
    zero.zero_stage = stage;
    spec.options.deepspeed_plugin = zero;
    const StepResult r = first_step(spec);
    INFO("zero stage ", stage, "\n", joined(r.lines));
    CHECK(r.findings.empty());
    if (world()->size() > 1)
      CHECK(has_line(r.lines, fmt::format("gradients are sharded under zero_{} (each rank holds its slice of the "
                                          "average): the cross-rank gradient check does not apply",
                                          stage)));
  }
}

}  // namespace test
