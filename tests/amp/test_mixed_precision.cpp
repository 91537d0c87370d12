// Mixed precision through the Accelerator on every rank: the fp16 loss scaler's agreed skip on an
// overflow anywhere, its growth after 2000 clean steps, 1000 overflows that never reach the weights,
// clip_grad_norm's single unscale, the saved scaler state, and the policy's settings and errors.
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "../ddp/support.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

using namespace test;

namespace {

AcceleratorOptions fp16_options(std::optional<LossScalerOptions> scaler = std::nullopt) {
  AcceleratorOptions o = options();
  o.mixed_precision = "fp16";
  o.loss_scaler = scaler;
  return o;
}

// One forward and backward of the small MLP on a fixed batch under autocast.
void forward_backward(Accelerator& accelerator, nn::Module& model, const Tensor& x, const Tensor& y) {
  Tensor loss;
  {
    auto autocast = accelerator.autocast();
    const Tensor diff = model.forward(x) - y;
    loss = mean(diff * diff);
  }
  accelerator.backward(loss);
}

// Puts value into the first element of the first parameter's grad that has one.
void inject(nn::Module& model, double value) {
  for (const Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    nograd::fill_(nograd::narrow(nograd::reshape(p.grad(), {-1}), 0, 0, 1), value);
    return;
  }
  FAIL("no parameter has a grad");
}

bool all_finite(const std::vector<double>& values) {
  for (double v : values)
    if (!std::isfinite(v)) return false;
  return true;
}

struct Setup {
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  Tensor x, y;
};

Setup setup(Accelerator& accelerator, const std::string& optimizer = "adamw") {
  Setup s;
  s.model = make_mlp(7);
  s.optimizer = make_optimizer(optimizer, s.model->parameters());
  accelerator.prepare(s.model, s.optimizer);
  Generator gen(99 + static_cast<uint64_t>(accelerator.process_index()));  // each rank its own batch
  s.x = randn({16, 8}, gen);
  s.y = tanh(s.x);
  s.y = narrow(s.y, 1, 0, 4);
  return s;
}

}  // namespace

TEST_CASE("fp16: an inf in one rank's grad makes every rank skip, halve the scale and keep its weights bitwise") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator);
  const int world = accelerator.num_processes();
  const int culprit = world - 1;  // the last rank: with 2 ranks, not the main process
  // A clean step first, so the optimizer has state that a wrong update would also change.
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  s.optimizer->step();
  CHECK_FALSE(accelerator.optimizer_step_was_skipped());
  CHECK(accelerator.loss_scaler()->scale() == 65536.0);

  const std::vector<double> before = weights_of(*s.model);
  const optim::StateDict state_before = s.optimizer->state_dict();
  std::vector<std::vector<float>> moments_before;
  for (const auto& [name, t] : state_before) moments_before.push_back(to(t, DType::f32).to_vector<float>());
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  if (accelerator.process_index() == culprit) inject(*s.model, std::numeric_limits<double>::infinity());
  s.optimizer->step();

  CHECK(accelerator.optimizer_step_was_skipped());
  CHECK(accelerator.loss_scaler()->scale() == 32768.0);
  CHECK(accelerator.loss_scaler()->skipped_steps() == 1);
  const std::vector<double> after = weights_of(*s.model);
  CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(double)) == 0);
  const optim::StateDict state_after = s.optimizer->state_dict();
  REQUIRE(state_after.size() == state_before.size());
  for (size_t i = 0; i < state_after.size(); ++i)
    CHECK_MESSAGE(to(state_after[i].second, DType::f32).to_vector<float>() == moments_before[i], state_after[i].first);
  // Every rank saw the same: skipped, at the same scale.
  for (double v : all_ranks(accelerator.optimizer_step_was_skipped() ? 1.0 : 0.0)) CHECK(v == 1.0);
  for (double v : all_ranks(accelerator.loss_scaler()->scale())) CHECK(v == 32768.0);
  CHECK(differs_across_ranks(after) == "");

  // The next clean step goes ahead.
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  s.optimizer->step();
  CHECK_FALSE(accelerator.optimizer_step_was_skipped());
  CHECK(weights_of(*s.model) != before);
}

TEST_CASE("fp16: a NaN is an overflow too") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator, "sgd");
  const std::vector<double> before = weights_of(*s.model);
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  if (accelerator.process_index() == 0) inject(*s.model, std::numeric_limits<double>::quiet_NaN());
  s.optimizer->step();
  CHECK(accelerator.optimizer_step_was_skipped());
  CHECK(weights_of(*s.model) == before);
}

TEST_CASE("fp16: the scale doubles after 2000 clean steps, not before") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator, "sgd");
  for (int step = 1; step <= 2000; ++step) {
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    s.optimizer->step();
    REQUIRE_FALSE(accelerator.optimizer_step_was_skipped());
    if (step == 1999) CHECK(accelerator.loss_scaler()->scale() == 65536.0);
  }
  CHECK(accelerator.loss_scaler()->scale() == 131072.0);
  CHECK(accelerator.loss_scaler()->clean_steps() == 0);
  CHECK(accelerator.loss_scaler()->skipped_steps() == 0);
}

TEST_CASE("fp16: growth and backoff are adjustable") {
  Accelerator accelerator(fp16_options(LossScalerOptions{.init_scale = 8.0, .growth_factor = 4.0,
                                                         .backoff_factor = 0.25, .growth_interval = 3}));
  Setup s = setup(accelerator, "sgd");
  for (int step = 0; step < 3; ++step) {
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    s.optimizer->step();
  }
  CHECK(accelerator.loss_scaler()->scale() == 32.0);
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  inject(*s.model, std::numeric_limits<double>::infinity());
  s.optimizer->step();
  CHECK(accelerator.loss_scaler()->scale() == 8.0);
}

TEST_CASE("fp16: 1000 injected overflows never put a NaN or inf into the weights") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator);
  const int world = accelerator.num_processes();
  const std::vector<double> start = weights_of(*s.model);
  for (int i = 0; i < 1000; ++i) {
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    // A different rank each time, inf or -inf or NaN.
    if (accelerator.process_index() == i % world) {
      const double bad[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
      inject(*s.model, bad[i % 3]);
    }
    s.optimizer->step();
    REQUIRE(accelerator.optimizer_step_was_skipped());
  }
  const std::vector<double> w = weights_of(*s.model);
  CHECK(all_finite(w));
  CHECK(w == start);
  CHECK(accelerator.loss_scaler()->skipped_steps() == 1000);
  // The scale bottoms out at the smallest normal f32, and clean steps from there still train finitely.
  CHECK(accelerator.loss_scaler()->scale() == static_cast<double>(std::numeric_limits<float>::min()));
  for (int i = 0; i < 3; ++i) {
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    s.optimizer->step();
  }
  CHECK(all_finite(weights_of(*s.model)));
}

TEST_CASE("fp16: clip_grad_norm unscales first, and the step does not unscale again") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator, "sgd");
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  // The grads as backward left them: averaged over the ranks and multiplied by the scale.
  double scaled_sq = 0;
  for (const Tensor& p : s.model->parameters())
    for (float v : p.grad().to_vector<float>()) scaled_sq += static_cast<double>(v) * v;
  const double scale = accelerator.loss_scaler()->scale();
  const double norm = accelerator.clip_grad_norm(*s.model, 1e9);
  CHECK(norm == doctest::Approx(std::sqrt(scaled_sq) / scale).epsilon(1e-5));
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : s.model->parameters()) grads.push_back(p.grad().to_vector<float>());
  s.optimizer->step();
  CHECK_FALSE(accelerator.optimizer_step_was_skipped());
  size_t i = 0;
  for (const Tensor& p : s.model->parameters()) CHECK(p.grad().to_vector<float>() == grads[i++]);
}

TEST_CASE("fp16: the scaler's state round-trips through state_dict, into another Accelerator") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator, "sgd");
  s.optimizer->zero_grad();
  forward_backward(accelerator, *s.model, s.x, s.y);
  inject(*s.model, std::numeric_limits<double>::infinity());
  s.optimizer->step();
  for (int i = 0; i < 3; ++i) {
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    s.optimizer->step();
  }
  const optim::StateDict saved = accelerator.loss_scaler()->state_dict();
  Accelerator resumed(fp16_options());
  resumed.loss_scaler()->load_state_dict(saved);
  CHECK(resumed.loss_scaler()->scale() == 32768.0);
  CHECK(resumed.loss_scaler()->clean_steps() == 3);
  CHECK(resumed.loss_scaler()->skipped_steps() == 1);
  CHECK(error_of([&] { resumed.loss_scaler()->load_state_dict({{"scale", scalar_tensor(2.0, DType::f64)}}); }) ==
        "LossScaler::load_state_dict: missing or not one-element: clean_steps, skipped_steps");
}

TEST_CASE("bf16 has no loss scaler and trains like f32 up to rounding; gradients can travel in bf16") {
  for (const char* comm : {"f32", "compute"}) {
    AcceleratorOptions o = options();
    o.mixed_precision = "bf16";
    o.grad_comm_dtype = comm;
    Accelerator accelerator(o);
    CHECK(accelerator.loss_scaler() == nullptr);
    CHECK(accelerator.precision_policy().compute == DType::bf16);
    CHECK(accelerator.precision_policy().grad_comm == (std::string(comm) == "f32" ? DType::f32 : DType::bf16));
    Setup s = setup(accelerator, "sgd");
    Accelerator plain(options());
    Setup r = setup(plain, "sgd");
    for (int i = 0; i < 5; ++i) {
      for (auto [acc, st] : {std::pair{&accelerator, &s}, std::pair{&plain, &r}}) {
        st->optimizer->zero_grad();
        forward_backward(*acc, *st->model, st->x, st->y);
        st->optimizer->step();
      }
    }
    for (const Tensor& p : s.model->parameters()) {
      CHECK(p.dtype() == DType::f32);  // the masters stay f32
      CHECK(p.grad().dtype() == DType::f32);
    }
    CHECK(max_abs_diff(weights_of(*s.model), weights_of(*r.model)) < 2e-2);
    CHECK(max_abs_diff(weights_of(*s.model), weights_of(*r.model)) > 0);  // bf16 really was used
    CHECK(differs_across_ranks(weights_of(*s.model)) == "");
  }
}

TEST_CASE("the effective policy is printed once, by the main process") {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  {
    AcceleratorOptions o;
    o.mixed_precision = "fp16";
    o.backend = "auto";
    Accelerator accelerator(o);
  }
  std::cerr.rdbuf(old);
  const std::string out = captured.str();
  const std::string line = "accel: precision policy: param f32, compute f16, reduction f32, grad_comm f32, dynamic "
                           "loss scale 65536 (x2 after 2000 clean steps, x0.5 on overflow)";
  const bool main = world()->rank() == 0;
  CHECK((out.find(line) != std::string::npos) == main);
  if (main) CHECK(out.find(line) == out.rfind(line));
}

TEST_CASE("contradictory precision settings fail with a message naming them") {
  AcceleratorOptions o = options();
  o.mixed_precision = "bf16";
  o.grad_comm_dtype = "f16";
  CHECK(error_of([&] { Accelerator a(o); }) ==
        "Accelerator: mixed_precision=bf16 (from code) and grad_comm_dtype=f16 (from code) conflict: "
        "PrecisionPolicy: grad_comm_dtype=f16 conflicts with mixed_precision=bf16: gradients are communicated in f32 "
        "or in the compute dtype (bf16); use f32 or compute");
  o.mixed_precision = "no";
  o.grad_comm_dtype = "bf16";
  CHECK(error_of([&] { Accelerator a(o); }).find("grad_comm_dtype=bf16 conflicts with mixed_precision=no") !=
        std::string::npos);
  o.grad_comm_dtype = std::nullopt;
  o.mixed_precision = "bf16";
  o.loss_scaler = LossScalerOptions{};
  CHECK(error_of([&] { Accelerator a(o); }) ==
        "Accelerator: loss_scaler options (from code) conflict with mixed_precision=bf16 (from code): only fp16 uses a "
        "loss scaler; drop the loss_scaler options or use fp16");
  o.mixed_precision = "fp16";
  o.loss_scaler = LossScalerOptions{.backoff_factor = 1.5};
  CHECK(error_of([&] { Accelerator a(o); }) == "LossScaler: backoff_factor must be in (0, 1), got 1.5");
  o.loss_scaler = std::nullopt;
  o.mixed_precision = "fp4";
  CHECK(error_of([&] { Accelerator a(o); }) ==
        "Accelerator: mixed_precision 'fp4' from code is not valid; expected no, fp16, bf16 or fp8");
}

TEST_CASE("fp16 with gradient accumulation: the scaler acts once per window, and clip waits for the last micro-step") {
  AcceleratorOptions o = fp16_options();
  o.gradient_accumulation_steps = 2;
  Accelerator accelerator(o);
  Setup s = setup(accelerator, "sgd");
  const std::vector<double> start = weights_of(*s.model);
  {
    auto scope = accelerator.accumulate();
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    CHECK_FALSE(accelerator.sync_gradients());
    CHECK(error_of([&] { accelerator.clip_grad_norm(*s.model, 1.0); }) ==
          "Accelerator::clip_grad_norm: with mixed_precision=fp16, clip on the micro-step that updates "
          "(sync_gradients() true): before it the accumulated grads are still multiplied by the loss scale");
    s.optimizer->step();  // not the end of the window: no update, no scaler step
    CHECK(accelerator.loss_scaler()->clean_steps() == 0);
    CHECK(weights_of(*s.model) == start);
  }
  {
    auto scope = accelerator.accumulate();
    s.optimizer->zero_grad();
    forward_backward(accelerator, *s.model, s.x, s.y);
    CHECK(accelerator.sync_gradients());
    CHECK(std::isfinite(accelerator.clip_grad_norm(*s.model, 1.0)));
    s.optimizer->step();
  }
  CHECK_FALSE(accelerator.optimizer_step_was_skipped());
  CHECK(accelerator.loss_scaler()->clean_steps() == 1);
  CHECK(weights_of(*s.model) != start);
  CHECK(all_finite(weights_of(*s.model)));
}

TEST_CASE("fp16 takes one prepared optimizer: a second is rejected") {
  Accelerator accelerator(fp16_options());
  Setup s = setup(accelerator, "sgd");
  auto second = make_optimizer("sgd", s.model->parameters());
  CHECK(error_of([&] { accelerator.prepare(second); }) ==
        "Accelerator::prepare: with mixed_precision=fp16 one optimizer can be prepared (the loss scaler unscales, "
        "checks and updates once per step); this is a second one");
}

TEST_CASE("a prepared model's forward runs in the mixed precision by itself, with f32 outputs, and trains") {
  auto values = [](const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); };
  for (const char* mode : {"bf16", "fp16"}) {
    INFO(mode);
    AcceleratorOptions o = options();
    o.mixed_precision = mode;
    Accelerator accelerator(o);
    Generator gen(5);
    auto model = std::make_shared<nn::Linear>(64, 8, true, gen);
    Generator same(5);
    auto plain = std::make_shared<nn::Linear>(64, 8, true, same);  // the same weights, not prepared
    const Tensor x = randn({16, 64}, gen);
    const Tensor f32_out = plain->forward(x);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05});
    auto [net, opt] = accelerator.prepare(model, optimizer);
    const Tensor out = net->forward(x);  // no autocast scope in the loop
    CHECK(out.dtype() == DType::f32);    // converted back, as Accelerate's convert_outputs_to_fp32
    Tensor reduced;
    {
      auto autocast = accelerator.autocast();
      reduced = to_dtype(plain->forward(x), DType::f32);  // the unprepared model under an explicit scope
    }
    CHECK(values(out) == values(reduced));       // the same reduced-precision matmul
    CHECK(max_abs_diff(values(out), values(f32_out)) > 1e-4);  // and not the f32 one
    CHECK(max_abs_diff(values(out), values(f32_out)) < 0.1);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      opt->zero_grad();
      const Tensor loss = nn::mse_loss(net->forward(x), zeros({16, 8}));
      accelerator.backward(loss);
      opt->step();
      (step == 0 ? first : last) = loss.item();
    }
    CHECK(last < 0.5 * first);
    // Outside the model nothing is autocast: the plain model still gives f32 bits.
    CHECK(values(plain->forward(x)) == values(f32_out));
  }
}
