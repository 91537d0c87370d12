// The multi-tensor kernels against the CPU loops: fused AdamW and SGD over lists that mix sizes (from
// one element to several blocks, and empty tensors) and dtypes, over several steps; and the loss
// scaler's unscale_and_check_, which must scale every grad and find an injected inf or NaN anywhere.
#include <limits>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/optim_ops.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

// Sizes around the kernels' 16384-element chunks, and an empty tensor.
const std::vector<int64_t> kSizes = {1, 3, 0, 16384, 16385, 100003};

struct Lists {
  std::vector<Tensor> params, grads, state1, state2;
};

// The same lists on the CPU and the GPU: params of the given dtypes (cycling), f32/f64 state.
std::pair<Lists, Lists> make_lists(const std::vector<DType>& dtypes, uint64_t seed) {
  Lists cpu, gpu;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    const DType dtype = dtypes[i % dtypes.size()];
    const DType state = dtype == DType::f64 ? DType::f64 : DType::f32;
    const Tensor p = random({kSizes[i]}, dtype, Device::cpu(), seed + i);
    const Tensor m = nograd::mul(random({kSizes[i]}, state, Device::cpu(), seed + 100 + i), 0.1);
    const Tensor v = nograd::abs(random({kSizes[i]}, state, Device::cpu(), seed + 200 + i));
    cpu.params.push_back(p);
    cpu.state1.push_back(m);
    cpu.state2.push_back(v);
    gpu.params.push_back(nograd::to_device(p, kGpu));
    gpu.state1.push_back(nograd::to_device(m, kGpu));
    gpu.state2.push_back(nograd::to_device(v, kGpu));
  }
  return {cpu, gpu};
}

void set_grads(Lists& cpu, Lists& gpu, uint64_t seed) {
  cpu.grads.clear();
  gpu.grads.clear();
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    const Tensor g = random(cpu.params[i].shape(), cpu.params[i].dtype(), Device::cpu(), seed + i);
    cpu.grads.push_back(g);
    gpu.grads.push_back(nograd::to_device(g, kGpu));
  }
}

// The GPU contracts a * b + c into one FMA where the CPU rounds twice: a few ulps of f32 per step.
void check_lists(const Lists& got, const Lists& want, bool with_state2, const std::string& what) {
  for (size_t i = 0; i < want.params.size(); ++i) {
    const double rel = rtol(want.params[i].dtype()) * 4;
    check_close(got.params[i], want.params[i], rel, rel, fmt::format("{} params[{}]", what, i));
    if (!want.state1.empty())
      check_close(got.state1[i], want.state1[i], 1e-5, 1e-6, fmt::format("{} state1[{}]", what, i));
    if (with_state2) check_close(got.state2[i], want.state2[i], 1e-5, 1e-7, fmt::format("{} state2[{}]", what, i));
  }
}

}  // namespace

TEST_CASE("adamw_step_: one launch over a mixed list equals the CPU update, step after step") {
  for (const std::vector<DType>& dtypes : std::vector<std::vector<DType>>{
           {DType::f32}, {DType::bf16}, {DType::f16}, {DType::f64}, {DType::f32, DType::bf16, DType::f16}}) {
    auto [cpu, gpu] = make_lists(dtypes, 300);
    const nograd::AdamWConfig config{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.05};
    for (int64_t step = 1; step <= 3; ++step) {
      set_grads(cpu, gpu, 400 + 10 * step);
      nograd::adamw_step_(cpu.params, cpu.grads, cpu.state1, cpu.state2, config, step);
      nograd::adamw_step_(gpu.params, gpu.grads, gpu.state1, gpu.state2, config, step);
    }
    check_lists(gpu, cpu, true, fmt::format("adamw {}", dtype_name(dtypes.back())));
  }
}

TEST_CASE("sgd_step_: plain, momentum, dampening and nesterov equal the CPU update") {
  const std::vector<nograd::SgdConfig> configs = {
      {.lr = 0.1, .momentum = 0.0, .dampening = 0.0, .weight_decay = 0.0, .nesterov = false},
      {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .nesterov = false},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.0, .nesterov = true}};
  for (const nograd::SgdConfig& config : configs) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
      auto [cpu, gpu] = make_lists({dtype}, 500);
      if (config.momentum == 0.0) {
        cpu.state1.clear();
        gpu.state1.clear();
      }
      for (int step = 0; step < 3; ++step) {
        set_grads(cpu, gpu, 600 + 10 * step);
        nograd::sgd_step_(cpu.params, cpu.grads, cpu.state1, config, step == 0);
        nograd::sgd_step_(gpu.params, gpu.grads, gpu.state1, config, step == 0);
      }
      check_lists(gpu, cpu, false, fmt::format("sgd momentum {} {}", config.momentum, dtype_name(dtype)));
    }
  }
}

TEST_CASE("unscale_and_check_: scales every grad and finds an injected inf or NaN wherever it is") {
  const double inv_scale = 1.0 / 65536.0;
  auto fresh = [](uint64_t seed) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const DType dtype = std::vector<DType>{DType::f32, DType::bf16, DType::f16, DType::f64}[i % 4];
      grads.push_back(nograd::mul(random({kSizes[i]}, dtype, Device::cpu(), seed + i), 1000.0));
    }
    return grads;
  };
  const std::vector<Tensor> cpu = fresh(700);
  std::vector<Tensor> gpu;
  for (const Tensor& g : cpu) gpu.push_back(nograd::to_device(g, kGpu));
  CHECK_FALSE(nograd::unscale_and_check_(cpu, inv_scale));
  CHECK_FALSE(nograd::unscale_and_check_(gpu, inv_scale));
  for (size_t i = 0; i < cpu.size(); ++i)
    check_close(gpu[i], cpu[i], 0.0, 0.0, fmt::format("unscaled grads[{}]", i));  // one multiply: exact

  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // (tensor, element, value): first and last elements, across chunk edges, each dtype.
  const std::vector<std::tuple<size_t, int64_t, double>> cases = {
      {0, 0, inf}, {1, 2, nan}, {3, 16383, -inf}, {4, 16384, nan}, {5, 100002, inf}, {5, 50000, nan}};
  for (const auto& [tensor, element, value] : cases) {
    std::vector<Tensor> grads = fresh(800);
    nograd::copy_(nograd::narrow(grads[tensor], 0, element, 1), full({1}, value, DType::f64));
    std::vector<Tensor> on_gpu;
    for (const Tensor& g : grads) on_gpu.push_back(nograd::to_device(g, kGpu));
    const std::string what = fmt::format("{} at grads[{}][{}]", value, tensor, element);
    CHECK_MESSAGE(nograd::unscale_and_check_(on_gpu, inv_scale), what);
    CHECK_MESSAGE(nograd::unscale_and_check_(grads, inv_scale), what);
    for (size_t i = 0; i < grads.size(); ++i) check_close(on_gpu[i], grads[i], 0.0, 0.0, what);
    // The next call on the same (now scaled, still non-finite) grads finds it again: the flag is fresh.
    CHECK_MESSAGE(nograd::unscale_and_check_(on_gpu, 1.0), what);
  }
  CHECK_FALSE(nograd::unscale_and_check_(std::vector<Tensor>{}, 0.5));
  CHECK(error_of([&] { nograd::unscale_and_check_({gpu[0], cpu[1]}, 0.5); }) ==
        "unscale_and_check_: grads[1] is on cpu but grads[0] is on cuda:0");
}
