// How grads are averaged across ranks on the wire: f16 is divided by the rank count before the sum,
// every other dtype summed and divided after (ReduceOp::avg).
#pragma once

#include "collective/reduce_op.h"
#include "tensor/tensor.h"

namespace accel {

// Readies wire (in place) for averaging over ranks and returns the op that finishes the average.
// f16's largest value is 65504, so the sum of N grads whose average fits can still overflow it (two
// ranks of 40000): f16 wires are scaled by 1/N first and summed, as DeepSpeed and PyTorch's DDP do.
// For N a power of 2 the scaling is exact in the normal range, so the result is avg's whenever the
// sum would not have overflowed. bf16 and f32 have f32's range: summed, then divided.
ReduceOp predivide_for_average(const Tensor& wire, int ranks);

}  // namespace accel
