// The differentiable neural-network ops of autograd/functions.h against finite differences in f64.
#include <doctest/doctest.h>

#include "accel.h"
#include "autograd/node.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"

using namespace accel;

namespace {

Tensor input(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  Tensor t = nograd::mul(randn(shape, gen, DType::f64), scale);
  return t.requires_grad_();
}

void check(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

}  // namespace

TEST_CASE("gradcheck: softmax and log_softmax over each dim, and on a strided input") {
  Tensor a = input({3, 4, 5}, 1, 2.0);
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim ", dim);
    check([dim](const auto& x) { return softmax(x[0], dim); }, {a});
    check([dim](const auto& x) { return log_softmax(x[0], dim); }, {a});
  }
  check([](const auto& x) { return softmax(transpose(x[0], 0, 2), 1); }, {a});
  check([](const auto& x) { return log_softmax(transpose(x[0], 1, 2), 2) * 2.0; }, {a});
}

TEST_CASE("gradcheck: layer_norm w.r.t. x, weight and bias") {
  Tensor x = input({2, 3, 6}, 2, 1.5), w = input({6}, 3), b = input({6}, 4);
  check([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); }, {x, w, b});
  check([](const auto& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); }, {x});
  check([](const auto& in) { return layer_norm(in[0], in[1], Tensor(), 1e-3); }, {x, w});
  check([](const auto& in) { return layer_norm(in[0], Tensor(), in[1], 1e-5); }, {x, b});
  check([](const auto& in) { return layer_norm(transpose(in[0], 1, 2), in[1], in[2], 1e-5); },
        {input({2, 5, 3}, 5), input({5}, 6), input({5}, 7)});
}

TEST_CASE("gradcheck: embedding w.r.t. weight, with repeated indices") {
  Tensor weight = input({6, 3}, 8);
  const Tensor idx64 = from_vector<int64_t>({1, 4, 1, 0, 5, 1}, {2, 3});
  const Tensor idx32 = from_vector<int32_t>({2, 2, 3});
  check([&](const auto& x) { return embedding(x[0], idx64); }, {weight});
  check([&](const auto& x) { return embedding(x[0], idx32) * embedding(x[0], idx32); }, {weight});
}

TEST_CASE("embedding with padding_idx: that row gets no grad, the others PyTorch's") {
  // F.embedding(idx, w, padding_idx=-1) for w [4, 2], backward of arange(12).reshape(2, 3, 2)
  // (PyTorch 2.x): w.grad rows [6, 7], [4, 6], [10, 11], [0, 0]. The forward still reads row 3.
  for (int64_t padding_idx : {3, -1}) {
    Tensor w = from_vector<double>({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, {4, 2}).requires_grad_();
    const Tensor idx = from_vector<int64_t>({1, 3, 1, 0, 3, 2}, {2, 3});
    const Tensor out = embedding(w, idx, padding_idx);
    CHECK(out.to_vector<double>()[2] == 0.7);
    backward(out, reshape(to(arange(12), DType::f64), {2, 3, 2}));
    CHECK(w.grad().to_vector<double>() == std::vector<double>{6, 7, 4, 6, 10, 11, 0, 0});
  }
  const Tensor w = input({4, 2}, 13);
  CHECK_THROWS_WITH_AS(embedding(w, from_vector<int64_t>({0}), 4),
                       "embedding: padding_idx 4 is out of range for 4 rows (expected -4..3)", Error);
  // The rows that are not padding still pass gradcheck.
  check([](const auto& x) { return embedding(x[0], from_vector<int64_t>({0, 2, 2, 1}), 3); }, {w});
}

TEST_CASE("gradcheck: cross_entropy w.r.t. logits, for each reduction and with ignore_index") {
  Tensor logits = input({5, 4}, 9, 2.0);
  const Tensor target = from_vector<int64_t>({3, -100, 0, 2, 0});
  const Tensor target32 = from_vector<int32_t>({1, 1, 3, 0, 2});
  for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
    INFO("reduction ", static_cast<int>(reduction));
    check([&](const auto& x) { return cross_entropy(x[0], target, -100, reduction); }, {logits});
    check([&](const auto& x) { return cross_entropy(x[0], target32, 1, reduction); }, {logits});
    check([&](const auto& x) { return cross_entropy(x[0], target32, -100, reduction); }, {logits});
  }
  // Every target ignored: the loss is constantly 0, so the grad is 0.
  const Tensor none_left = from_vector<int64_t>({7, 7, 7, 7, 7});
  check([&](const auto& x) { return cross_entropy(x[0], none_left, 7, Reduction::mean); }, {logits});
  // Composed with another op, so grad_loss is not 1.
  check([&](const auto& x) { return cross_entropy(x[0] * x[0], target, -100) * 3.0; }, {logits});
}

TEST_CASE("gradcheck: cross_entropy with per-class weight and label_smoothing, for each reduction") {
  Tensor logits = input({5, 4}, 14, 2.0);
  const Tensor target = from_vector<int64_t>({3, -100, 0, 2, 0});
  const Tensor target32 = from_vector<int32_t>({3, 1, 0, 2, 0});  // with ignore_index 0
  const Tensor weight = from_vector<double>({0.5, 2.0, 1.0, 0.25});
  for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
    for (double eps : {0.0, 0.15, 1.0}) {
      INFO("reduction ", static_cast<int>(reduction), " label_smoothing ", eps);
      check([&](const auto& x) {
        return cross_entropy(x[0], target, {.reduction = reduction, .label_smoothing = eps});
      }, {logits});
      check([&](const auto& x) {
        return cross_entropy(x[0], target, {.weight = weight, .reduction = reduction, .label_smoothing = eps});
      }, {logits});
      check([&](const auto& x) {
        return cross_entropy(x[0], target32, {.weight = weight, .ignore_index = 0, .reduction = reduction,
                                            .label_smoothing = eps});
      }, {logits});
    }
  }
  check([&](const auto& x) {
    return cross_entropy(x[0] * x[0], target, {.weight = weight, .label_smoothing = 0.2}) * 3.0;
  }, {logits});
}

TEST_CASE("cross_entropy with options records its node and matches PyTorch's weighted, smoothed mean") {
  // F.cross_entropy(x, [2, 0, -100, 1], weight=[0.5, 2, 1.5], label_smoothing=0.1) and its grad
  // (PyTorch 2.x, f64); tests/tensor/test_nn_op_options.cpp has every reduction and option.
  Tensor x = from_vector<double>({1.0, -0.5, 2.0, 0.25, 0.75, -1.0, 3.0, 0.0, -2.0, -1.5, 0.5, 1.25}, {4, 3})
                 .requires_grad_();
  const Tensor target = from_vector<int64_t>({2, 0, -100, 1});
  const Tensor weight = from_vector<double>({0.5, 2.0, 1.5});
  const Tensor loss = cross_entropy(x, target, {.weight = weight, .label_smoothing = 0.1});
  CHECK(loss.grad_fn()->name() == "CrossEntropyBackward");
  CHECK(loss.item() == doctest::Approx(0.9169238847723563).epsilon(1e-14));
  backward(loss);
  const std::vector<double> torch_grad{0.0899197506896552,   0.004326850705841434, -0.09424660139549661,
                                       -0.06698281609547502, 0.06524815458034372,  0.0017346615151313026,
                                       0.0,                  0.0,                  0.0,
                                       0.01594566725148562,  -0.31805550306501373, 0.3021098358135282};
  const auto grad = x.grad().to_vector<double>();
  for (size_t i = 0; i < grad.size(); ++i) CHECK(grad[i] == doctest::Approx(torch_grad[i]).epsilon(1e-13));
}

// The documented differences from PyTorch: a mean over nothing is 0 (PyTorch: NaN), and f16 logits
// give an f32 loss (PyTorch: f16).
TEST_CASE("cross_entropy differs from PyTorch on purpose: 0 for every target ignored, f32 for f16 logits") {
  Tensor x = input({3, 4}, 15);
  const Tensor ignored = from_vector<int64_t>({-100, -100, -100});
  const CrossEntropyOptions weighted{.weight = from_vector<double>({1, 2, 3, 4}), .label_smoothing = 0.1};
  for (const CrossEntropyOptions& options : {CrossEntropyOptions{}, weighted}) {
    const Tensor loss = cross_entropy(x, ignored, options);
    CHECK(loss.item() == 0.0);
    backward(loss);
    CHECK(x.grad().to_vector<double>() == std::vector<double>(12, 0.0));
  }
  Tensor h = to(from_vector<float>({1.0f, -2.0f, 0.5f, 3.0f, 0.0f, 1.0f}, {2, 3}), DType::f16).requires_grad_();
  const Tensor hl = cross_entropy(h, from_vector<int64_t>({2, 0}), {.label_smoothing = 0.1});
  CHECK(hl.dtype() == DType::f32);
  backward(hl);
  CHECK(h.grad().dtype() == DType::f16);
  CHECK(cross_entropy(h, from_vector<int64_t>({2, 0})).dtype() == DType::f32);
}

TEST_CASE("gradcheck: dropout with a fixed generator state") {
  Tensor a = input({4, 7}, 10);
  for (double p : {0.0, 0.3, 0.8, 1.0}) {
    INFO("p ", p);
    // A fresh generator per evaluation: every call draws the same mask.
    check([p](const auto& x) {
      Generator gen(1234);
      return dropout(x[0], p, gen);
    }, {a});
  }
  // The grad is the mask times 1 / (1 - p).
  Generator gen(77);
  Tensor x = input({50}, 11);
  const GeneratorState state = gen.state();
  backward(sum(dropout(x, 0.25, gen)));
  gen.set_state(state);
  const nograd::DropoutResult r = nograd::dropout(x, 0.25, gen);
  const auto mask = r.keep_mask.to_vector<bool>();
  const auto grad = x.grad().to_vector<double>();
  int wrong = 0;
  for (size_t i = 0; i < mask.size(); ++i) wrong += grad[i] != (mask[i] ? 1.0 / 0.75 : 0.0);
  CHECK(wrong == 0);
}

TEST_CASE("nn ops record nodes only when grad is needed, and p = 0 dropout is the identity") {
  Tensor x = input({2, 3}, 12);
  CHECK(softmax(x, 1).grad_fn()->name() == "SoftmaxBackward");
  CHECK(log_softmax(x, 1).grad_fn()->name() == "LogSoftmaxBackward");
  CHECK(layer_norm(x, Tensor(), Tensor()).grad_fn()->name() == "LayerNormBackward");
  CHECK(cross_entropy(x, from_vector<int64_t>({0, 2})).grad_fn()->name() == "CrossEntropyBackward");
  CHECK(embedding(x, from_vector<int64_t>({1})).grad_fn()->name() == "EmbeddingBackward");
  Generator gen(0);
  CHECK(dropout(x, 0.0, gen).is_same(x));
  CHECK(dropout(x, 0.5, gen).grad_fn()->name() == "DropoutBackward");
  {
    NoGradGuard no_grad;
    CHECK_FALSE(softmax(x, 1).requires_grad());
  }
  const Tensor plain = nograd::clone(x);  // no grad
  CHECK_FALSE(plain.requires_grad());
  CHECK_FALSE(cross_entropy(plain, from_vector<int64_t>({0, 2})).requires_grad());
}
