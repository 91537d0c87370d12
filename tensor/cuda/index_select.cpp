// CUDA index_select: check on the host, gather on the device.
#include "tensor/cuda/index_select.h"

#include <vector>

#include "kernels/nn.h"
#include "tensor/cpu/index_check.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

void index_select(const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim, int64_t outer,
                  int64_t size, int64_t inner) {
  const int64_t n = index.numel();
  cpu::dispatch_index(index.dtype(), "index_select", [&]<class I>() {
    const std::vector<I> idx = index.to_vector<I>();
    cpu::check_select_indices(idx.data(), n, dim, size);
  });
  const DeviceGuard guard(src.device());
  kernels::launch_gather_rows(out.data_ptr(), src.data_ptr(), index.data_ptr(), index.dtype(), outer, size, n,
                              inner * static_cast<int64_t>(dtype_size(src.dtype())), compute_stream(src.device()));
}

}  // namespace accel::cuda
