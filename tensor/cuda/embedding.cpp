// CUDA embedding: index checks and the counting sort on the host, gathers and sums on the device.
#include "tensor/cuda/embedding.h"

#include <vector>

#include "kernels/nn.h"
#include "tensor/cpu/index_check.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/pinned.h"
#include "tensor/cuda/scratch.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t rows = weight.shape()[0], dim = weight.shape()[1], n = indices.numel();
  cpu::dispatch_index(indices.dtype(), "embedding", [&]<class I>() {
    const std::vector<I> idx = indices.to_vector<I>();
    cpu::check_indices("embedding", idx.data(), n, rows, weight.shape());
  });
  const DeviceGuard guard(weight.device());
  kernels::launch_gather_rows(out.data_ptr(), weight.data_ptr(), indices.data_ptr(), indices.dtype(), 1, rows, n,
                              dim * static_cast<int64_t>(dtype_size(weight.dtype())), compute_stream(weight.device()));
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices) {
  const int64_t rows = grad_weight.shape()[0], dim = grad_weight.shape()[1], n = indices.numel();
  // start (rows + 1 entries) then order (n entries), uploaded together.
  std::vector<int64_t> table;
  cpu::dispatch_index(indices.dtype(), "embedding_backward", [&]<class I>() {
    const std::vector<I> idx = indices.to_vector<I>();
    cpu::check_indices("embedding_backward", idx.data(), n, rows, grad_weight.shape());
    std::vector<int64_t> start, order;
    cpu::group_by_index(idx.data(), n, rows, start, order);
    table = std::move(start);
    table.insert(table.end(), order.begin(), order.end());
  });
  if (rows == 0 || dim == 0) return;
  const Device device = grad_weight.device();
  const DeviceGuard guard(device);
  const Scratch device_table(table.size() * sizeof(int64_t), device);
  upload(device_table.get(), table.data(), table.size() * sizeof(int64_t), device);
  const int64_t* start = device_table.as<int64_t>();
  kernels::launch_embedding_backward(grad_out.dtype(), grad_weight.data_ptr(), grad_out.data_ptr(), start + rows + 1,
                                     start, rows, dim, compute_stream(device));
}

}  // namespace accel::cuda
