// CUDA cross-entropy: target checks on the host, one row kernel, and for a mean or sum one block that
// adds the per-row losses (kept in a scratch buffer) in f64.
#include "tensor/cuda/cross_entropy.h"

#include <algorithm>
#include <vector>

#include "kernels/nn.h"
#include "tensor/cpu/index_check.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/scratch.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

// The rows that count towards a mean; throws for a target out of range, as the CPU does.
int64_t counted_rows(const char* op, const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  int64_t counted = 0;
  cpu::dispatch_index(target.dtype(), op, [&]<class I>() {
    const std::vector<I> t = target.to_vector<I>();
    counted = cpu::check_targets(op, t.data(), logits.shape()[0], logits.shape()[1], ignore_index);
  });
  return counted;
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                   nograd::Reduction reduction) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const int64_t counted = counted_rows("cross_entropy", logits, target, ignore_index);
  const DeviceGuard guard(logits.device());
  const cudaStream_t stream = compute_stream(logits.device());
  if (reduction == nograd::Reduction::none) {
    kernels::launch_cross_entropy(logits.dtype(), target.dtype(), loss.data_ptr(), nullptr, logits.data_ptr(),
                                  target.data_ptr(), rows, classes, ignore_index, 1, stream);
    return;
  }
  const Scratch per_row(static_cast<size_t>(rows) * dtype_size(loss.dtype()), logits.device());
  kernels::launch_cross_entropy(logits.dtype(), target.dtype(), per_row.get(), loss.data_ptr(), logits.data_ptr(),
                                target.data_ptr(), rows, classes, ignore_index,
                                reduction == nograd::Reduction::mean ? counted : 1, stream);
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, int64_t ignore_index, nograd::Reduction reduction) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const int64_t counted = counted_rows("cross_entropy_backward", logits, target, ignore_index);
  const int64_t divisor = reduction == nograd::Reduction::mean ? std::max<int64_t>(counted, 1) : 1;
  const DeviceGuard guard(logits.device());
  kernels::launch_cross_entropy_backward(logits.dtype(), target.dtype(), grad_logits.data_ptr(), grad_loss.data_ptr(),
                                         reduction == nograd::Reduction::none, logits.data_ptr(), target.data_ptr(), rows,
                                         classes, ignore_index, divisor, compute_stream(logits.device()));
}

}  // namespace accel::cuda
