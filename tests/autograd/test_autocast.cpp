// Autocast: which ops run in the compute dtype and which in f32, the grads that come back to f32
// leaves, scopes that nest and stay on their thread, WeightCopies, and the precision policy's rules.
#include <doctest/doctest.h>

#include <cmath>
#include <thread>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/matmul.h"

using namespace accel;

namespace {

PrecisionPolicy policy(const char* mode) { return PrecisionPolicy::from_settings(mode); }

Tensor random(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, gen);
}

std::vector<double> values(const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

}  // namespace

TEST_CASE("autocast: matmul and linear run in the compute dtype, softmax, norms, losses and sums in f32") {
  for (const char* mode : {"fp16", "bf16"}) {
    CAPTURE(mode);
    const DType half = std::string(mode) == "fp16" ? DType::f16 : DType::bf16;
    const Tensor x = random({4, 8}, 1), w = random({6, 8}, 2), b = random({6}, 3);
    AutocastGuard autocast(policy(mode));
    CHECK(autocast::enabled());
    CHECK(autocast::compute_dtype() == half);
    const Tensor h = linear(x, w, b);
    CHECK(h.dtype() == half);
    CHECK(matmul(x, transpose(w, 0, 1)).dtype() == half);
    CHECK(relu(h).dtype() == half);  // activations stay in the compute dtype
    CHECK(softmax(h, 1).dtype() == DType::f32);
    CHECK(log_softmax(h, 1).dtype() == DType::f32);
    CHECK(causal_softmax(reshape(narrow(h, 1, 0, 4), {1, 4, 4}), 0.5).dtype() == DType::f32);
    CHECK(layer_norm(h, ones({6}), zeros({6})).dtype() == DType::f32);
    CHECK(cross_entropy(h, from_vector<int64_t>({0, 1, 2, 3})).dtype() == DType::f32);
    CHECK(sum(h).dtype() == DType::f32);
    CHECK(mean(h, {1}).dtype() == DType::f32);
    // Mixed operands of elementwise ops promote to the wider dtype, as in PyTorch.
    CHECK((h + zeros({4, 6})).dtype() == DType::f32);
    CHECK((nograd::to_dtype(h, DType::f16) * nograd::to_dtype(h, DType::bf16)).dtype() == DType::f32);
    CHECK((h * 2.0).dtype() == half);
  }
}

TEST_CASE("autocast: on the CPU halves are rounded at op boundaries, so results match the half ops exactly") {
  const Tensor x = random({5, 16}, 4), w = random({3, 16}, 5), b = random({3}, 6);
  AutocastGuard autocast(policy("bf16"));
  const Tensor got = linear(x, w, b);
  auto bf16 = [](const Tensor& t) { return nograd::to_dtype(t, DType::bf16); };
  const Tensor want = nograd::linear(bf16(x), bf16(w), bf16(b));
  CHECK(values(got) == values(want));
  const Tensor m = matmul(x, transpose(w, 0, 1));
  CHECK(values(m) == values(nograd::matmul(bf16(x), bf16(transpose(w, 0, 1)))));
}

TEST_CASE("autocast: grads flow through the casts and reach f32 leaves as f32, close to the f32 grads") {
  for (const char* mode : {"fp16", "bf16"}) {
    CAPTURE(mode);
    Tensor w = random({6, 8}, 7).requires_grad_(), b = random({6}, 8).requires_grad_();
    Tensor w2 = random({3, 6}, 9).requires_grad_();
    const Tensor x = random({10, 8}, 10);
    const Tensor y = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 2, 0});
    auto loss_of = [&] { return cross_entropy(linear(gelu(linear(x, w, b)), w2, Tensor()), y); };
    backward(loss_of());
    const Tensor gw = nograd::clone(w.grad()), gb = nograd::clone(b.grad()), gw2 = nograd::clone(w2.grad());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    w2.set_grad(Tensor());
    {
      AutocastGuard autocast(policy(mode));
      const Tensor loss = loss_of();
      CHECK(loss.dtype() == DType::f32);
      backward(loss);
    }
    for (const Tensor* t : {&w, &b, &w2}) CHECK(t->grad().dtype() == DType::f32);
    const double tol = std::string(mode) == "fp16" ? 5e-3 : 3e-2;
    CHECK(max_abs_diff(w.grad(), gw) < tol);
    CHECK(max_abs_diff(b.grad(), gb) < tol);
    CHECK(max_abs_diff(w2.grad(), gw2) < tol);
    CHECK(max_abs_diff(w.grad(), gw) > 0);  // the half path really ran
  }
}

TEST_CASE("autocast: off outside the scope, restored by nested scopes, per thread, and off for a policy of no") {
  CHECK_FALSE(autocast::enabled());
  const Tensor x = random({2, 3}, 11), w = random({4, 3}, 12);
  CHECK(linear(x, w, Tensor()).dtype() == DType::f32);
  {
    AutocastGuard outer(policy("bf16"));
    {
      AutocastGuard inner(policy("no"));  // a region that must stay in f32
      CHECK_FALSE(autocast::enabled());
      CHECK(linear(x, w, Tensor()).dtype() == DType::f32);
      AutocastGuard innermost(policy("fp16"));
      CHECK(linear(x, w, Tensor()).dtype() == DType::f16);
    }
    CHECK(autocast::compute_dtype() == DType::bf16);
    bool other_thread = true;
    std::thread([&] { other_thread = autocast::enabled(); }).join();
    CHECK_FALSE(other_thread);
  }
  CHECK_FALSE(autocast::enabled());
  CHECK(linear(x, w, Tensor()).dtype() == DType::f32);
}

TEST_CASE("WeightCopies: a registered master is used through its copy, rounded again only after mark_stale") {
  Tensor w = random({4, 3}, 13).requires_grad_();
  const Tensor x = random({2, 3}, 14);
  WeightCopies copies(DType::bf16);
  copies.add(w);
  const PrecisionPolicy bf16 = policy("bf16");
  for (int i = 0; i < 3; ++i) {
    AutocastGuard autocast(bf16, &copies);
    backward(sum(linear(x, w, Tensor())));
  }
  CHECK(copies.roundings() == 1);  // three forwards, one rounding
  CHECK(w.grad().dtype() == DType::f32);
  {
    NoGradGuard no_grad;
    nograd::mul_(w, 2.0);  // an optimizer step would do this
  }
  copies.mark_stale();
  AutocastGuard autocast(bf16, &copies);
  const Tensor y = linear(x, w, Tensor());
  CHECK(copies.roundings() == 2);
  CHECK(values(y) == values(nograd::linear(nograd::to_dtype(x, DType::bf16), nograd::to_dtype(w, DType::bf16), Tensor())));
  // A tensor that is not registered is cast as usual; a copy of another dtype is not used.
  CHECK(copies.copy_of(x).defined() == false);
  AutocastGuard fp16(policy("fp16"), &copies);
  CHECK(linear(x, w, Tensor()).dtype() == DType::f16);
  CHECK(copies.roundings() == 2);
}

TEST_CASE("PrecisionPolicy: built from the settings, described in one line, contradictions rejected") {
  CHECK(policy("no").describe() == "param f32, compute f32, reduction f32, grad_comm f32");
  CHECK(policy("fp16").describe() == "param f32, compute f16, reduction f32, grad_comm f32");
  CHECK(PrecisionPolicy::from_settings("bf16", "compute").describe() ==
        "param f32, compute bf16, reduction f32, grad_comm bf16");
  CHECK(PrecisionPolicy::from_settings("fp16", "f16").grad_comm == DType::f16);
  CHECK_FALSE(policy("no").is_mixed());
  CHECK_THROWS_WITH_AS(PrecisionPolicy::from_settings("bf16", "f16"),
                       "PrecisionPolicy: grad_comm_dtype=f16 conflicts with mixed_precision=bf16: gradients are "
                       "communicated in f32 or in the compute dtype (bf16); use f32 or compute",
                       Error);
  CHECK_THROWS_WITH_AS(PrecisionPolicy::from_settings("fp16", "i8"),
                       "PrecisionPolicy: grad_comm_dtype 'i8' is not valid; expected f32, compute, f16 or bf16", Error);
  PrecisionPolicy p = policy("fp16");
  p.param = DType::f16;
  CHECK_THROWS_WITH_AS(p.validate(), "PrecisionPolicy: param dtype f16 is not supported; master weights are f32",
                       Error);
  p = policy("fp16");
  p.grad_comm = DType::bf16;
  CHECK_THROWS_WITH_AS(p.validate(),
                       "PrecisionPolicy: grad_comm dtype bf16 conflicts with compute dtype f16; gradients are "
                       "communicated in f32 or in the compute dtype",
                       Error);
  CHECK_THROWS_WITH_AS(AutocastGuard{p}, doctest::Contains("conflicts with compute dtype f16"), Error);
}
