// Whole training steps on the GPU: an MLP and a small GPT (embedding, layer norm, masked softmax
// attention, gelu, dropout, cross-entropy, AdamW) trained on the GPU end up where the same training on
// the CPU ends up, and after the first step a training step makes no new cudaMalloc.
#include <fmt/ranges.h>

#include "tensor/cuda/allocator.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(16, 64, true, gen));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(64, 64, true, gen));
  mlp->push_back(std::make_shared<nn::GELU>());
  mlp->push_back(std::make_shared<nn::Linear>(64, 5, true, gen));
  return mlp;
}

// Trains model on device for `steps` AdamW steps over fixed random batches; returns the last loss.
template <class Model, class Batch>
double train(Model& model, Device device, int steps, Batch&& batch, const std::function<void()>& after_step = {}) {
  model.to(device);
  optim::AdamW optimizer(model.parameters(), optim::AdamWOptions{.lr = 3e-3, .weight_decay = 0.01});
  double loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    const auto [x, y] = batch(step);
    optimizer.zero_grad();
    const Tensor loss = nn::cross_entropy(model.forward(to(x, device)), to(y, device));
    backward(loss);
    optimizer.step();
    loss_value = loss.item();
    if (after_step) after_step();
  }
  return loss_value;
}

std::pair<Tensor, Tensor> mlp_batch(int step) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  const Tensor x = randn({64, 16}, gen);
  // Labels from a fixed rule of x, so there is something to learn.
  const std::vector<float> v = x.to_vector<float>();
  std::vector<int64_t> labels(64);
  for (int64_t i = 0; i < 64; ++i) labels[i] = static_cast<int64_t>(std::fabs(v[i * 16] + 2 * v[i * 16 + 1]) * 2) % 5;
  return {x, from_vector(labels)};
}

// Every parameter of the GPU model close to the CPU model's: the GPU sums in other orders and fuses
// multiply-adds, so the two drift apart by a few f32 ulps per step.
void check_same_weights(const nn::Module& gpu_model, const nn::Module& cpu_model, double rel, double abs) {
  const auto got = gpu_model.named_parameters();
  const auto want = cpu_model.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i].second, want[i].second, rel, abs, got[i].first);
}

}  // namespace

TEST_CASE("training: an MLP trained on the GPU ends where the CPU's ends") {
  auto cpu_model = make_mlp(5), gpu_model = make_mlp(5);
  const double cpu_loss = train(*cpu_model, Device::cpu(), 30, mlp_batch);
  const double gpu_loss = train(*gpu_model, kGpu, 30, mlp_batch);
  MESSAGE(fmt::format("MLP loss after 30 steps: cpu {:.6f}, gpu {:.6f}", cpu_loss, gpu_loss));
  CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-3));
  check_same_weights(*gpu_model, *cpu_model, 2e-3, 2e-4);
}

TEST_CASE("training: a small GPT trained on the GPU ends where the CPU's ends") {
  const nn::GPTConfig config{.vocab_size = 23, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32,
                             .dropout = 0.1};
  Generator cpu_gen(9), gpu_gen(9);
  nn::GPT cpu_model(config, cpu_gen), gpu_model(config, gpu_gen);
  auto batch = [&](int step) {
    std::vector<int64_t> ids(8 * 17);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + static_cast<size_t>(step) * 3 + i / 5) % 23);
    const Tensor all = from_vector(ids, {8, 17});
    return std::pair<Tensor, Tensor>{contiguous(narrow(all, 1, 0, 16)), contiguous(narrow(all, 1, 1, 16))};
  };
  // Dropout draws from each model's own generator, with the same seeds: the same masks on both devices.
  const double cpu_loss = train(cpu_model, Device::cpu(), 12, batch);
  const double gpu_loss = train(gpu_model, kGpu, 12, batch);
  MESSAGE(fmt::format("GPT loss after 12 steps: cpu {:.6f}, gpu {:.6f}", cpu_loss, gpu_loss));
  CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(2e-3));
  check_same_weights(gpu_model, cpu_model, 5e-3, 5e-4);
}

TEST_CASE("training: after the first step, a training step makes no new cudaMalloc") {
  const nn::GPTConfig config{.vocab_size = 31, .block_size = 32, .n_layer = 2, .n_head = 4, .n_embd = 64,
                             .dropout = 0.1};
  Generator gen(3);
  nn::GPT model(config, gen);
  auto batch = [](int step) {
    std::vector<int64_t> ids(16 * 33);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 13 + static_cast<size_t>(step)) % 31);
    const Tensor all = from_vector(ids, {16, 33});
    return std::pair<Tensor, Tensor>{contiguous(narrow(all, 1, 0, 32)), contiguous(narrow(all, 1, 1, 32))};
  };
  std::vector<int64_t> mallocs;
  train(model, kGpu, 6, batch, [&] { mallocs.push_back(cuda::allocator_stats(kGpu).device_mallocs); });
  MESSAGE(fmt::format("cudaMalloc calls after each step: {}", fmt::join(mallocs, ", ")));
  for (size_t i = 1; i < mallocs.size(); ++i) CHECK_MESSAGE(mallocs[i] == mallocs[0], fmt::format("step {}", i));
}
