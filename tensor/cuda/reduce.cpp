// CUDA row reductions: plan the launch, borrow a workspace for partials from the caching
// allocator, and queue the kernels on the compute stream.
#include "tensor/cuda/reduce.h"

#include "kernels/reduce.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/scratch.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

kernels::RowReduce to_kernel_op(cpu::ReduceOp op) {
  switch (op) {
    case cpu::ReduceOp::sum: return kernels::RowReduce::sum;
    case cpu::ReduceOp::mean: return kernels::RowReduce::mean;
    case cpu::ReduceOp::max: break;
    case cpu::ReduceOp::min:  // nograd::min runs -max(-t) here
      throw Error("reduce_rows: there is no CUDA min kernel; nograd::min reduces -t with max instead");
  }
  return kernels::RowReduce::max;
}

}  // namespace

void reduce_rows(cpu::ReduceOp op, const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  if (outer == 0) return;
  const DeviceGuard guard(in.device());
  const kernels::ReducePlan plan = kernels::plan_reduce_rows(outer, inner);
  const Scratch workspace(kernels::reduce_rows_workspace_bytes(plan, outer), in.device());
  kernels::launch_reduce_rows(to_kernel_op(op), in.dtype(), out.dtype(), out.data_ptr(), in.data_ptr(), outer, inner,
                              plan, workspace.get(), compute_stream(in.device()));
}

void argmax_rows(const Tensor& out, const Tensor& in, int64_t outer, int64_t inner) {
  if (outer == 0) return;
  const DeviceGuard guard(in.device());
  kernels::launch_argmax_rows(in.dtype(), static_cast<int64_t*>(out.data_ptr()), in.data_ptr(), outer, inner,
                              compute_stream(in.device()));
}

}  // namespace accel::cuda
