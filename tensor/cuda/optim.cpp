// CUDA multi-tensor updates: group the tensors by dtype, describe them in one table of TensorSlots,
// upload it, and launch once per dtype.
#include "tensor/cuda/optim.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "kernels/cuda_check.h"
#include "kernels/multi_tensor.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/pinned.h"
#include "tensor/cuda/scratch.h"
#include "tensor/cuda/stream.h"
#include "tensor/nograd/optim_ops.h"

namespace accel::cuda {

namespace {

// Calls make(i) for the slot of each non-empty targets[i], grouped by dtype, uploads the table and
// calls launch(dtype, table, count, blocks, stream) once per dtype present.
template <class Make, class Launch>
void run_multi_tensor(const std::vector<Tensor>& targets, Make&& make, Launch&& launch) {
  struct Group {
    DType dtype;
    size_t first;
    int count;
    int64_t blocks;
  };
  std::vector<kernels::TensorSlot> slots;
  std::vector<Group> groups;
  for (DType dtype : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    Group group{dtype, slots.size(), 0, 0};
    for (size_t i = 0; i < targets.size(); ++i) {
      const int64_t n = targets[i].numel();
      if (targets[i].dtype() != dtype || n == 0) continue;
      kernels::TensorSlot slot = make(i);
      slot.numel = n;
      slot.first_block = group.blocks;
      group.blocks += kernels::multi_tensor_blocks(n);
      slots.push_back(slot);
      ++group.count;
    }
    if (group.count > 0) groups.push_back(group);
  }
  if (slots.empty()) return;
  const Device device = targets[0].device();
  const DeviceGuard guard(device);
  const size_t bytes = slots.size() * sizeof(kernels::TensorSlot);
  const Scratch table(bytes, device);
  upload(table.get(), slots.data(), bytes, device);
  for (const Group& g : groups)
    launch(g.dtype, table.as<kernels::TensorSlot>() + g.first, g.count, g.blocks, compute_stream(device));
}

}  // namespace

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const nograd::SgdConfig& config, bool first_step) {
  const SgdCoeffs<double> k = sgd_coeffs(config.lr, config.momentum, config.dampening, config.weight_decay,
                                         config.nesterov, first_step);
  run_multi_tensor(
      params,
      [&](size_t i) {
        return kernels::TensorSlot{params[i].data_ptr(), grads[i].data_ptr(),
                                   k.use_momentum ? momentum_buffers[i].data_ptr() : nullptr, nullptr, 0, 0};
      },
      [&](DType dtype, const kernels::TensorSlot* table, int count, int64_t blocks, cudaStream_t stream) {
        kernels::launch_sgd_step(dtype, table, count, blocks, k, stream);
      });
}

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const nograd::AdamWConfig& config, int64_t step) {
  const AdamWCoeffs<double> k =
      adamw_coeffs(config.lr, config.beta1, config.beta2, config.eps, config.weight_decay, step);
  run_multi_tensor(
      params,
      [&](size_t i) {
        return kernels::TensorSlot{params[i].data_ptr(), grads[i].data_ptr(), exp_avgs[i].data_ptr(),
                                   exp_avg_sqs[i].data_ptr(), 0, 0};
      },
      [&](DType dtype, const kernels::TensorSlot* table, int count, int64_t blocks, cudaStream_t stream) {
        kernels::launch_adamw_step(dtype, table, count, blocks, k, stream);
      });
}

bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale) {
  const Device device = grads[0].device();
  const DeviceGuard guard(device);
  const Scratch flag(sizeof(int), device);
  ACCEL_CUDA_CHECK(cudaMemsetAsync(flag.get(), 0, sizeof(int), compute_stream(device)),
                   "cudaMemsetAsync(unscale_and_check_ flag)");
  run_multi_tensor(
      grads, [&](size_t i) { return kernels::TensorSlot{grads[i].data_ptr(), nullptr, nullptr, nullptr, 0, 0}; },
      [&](DType dtype, const kernels::TensorSlot* table, int count, int64_t blocks, cudaStream_t stream) {
        kernels::launch_unscale(dtype, table, count, blocks, inv_scale, flag.as<int>(), stream);
      });
  int found = 0;
  download(&found, flag.get(), sizeof(int), device);
  return found != 0;
}

}  // namespace accel::cuda
