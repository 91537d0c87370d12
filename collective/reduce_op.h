// ReduceOp (sum, avg, max, min) and the elementwise reduction math that every backend shares: the
// ring's local reduce step and the MPI backend's f16/bf16 user-defined ops both call it.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace accel {

// The numeric values are fixed and only ever appended to, as in ggml.h: a rank's op is compared with the
// other ranks' and recorded (ledger, traces) by number. Never reorder, renumber or reuse one; a new op
// takes the next number and a last row in kReduceOpNames (reduce_op.cpp) and in kAllReduceOps.
// tests/collective/test_reduce_op.cpp pins them.
enum class ReduceOp : uint8_t {
  sum = 0,
  avg = 1,
  max = 2,
  min = 3,
};

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};

const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min"

// acc[i] = acc[i] (op) in[i] for count elements of dtype. avg combines like sum; divide_by finishes it.
//  - f16/bf16 widen to f32, combine, and round back to nearest even, once per combination;
//  - integers wrap on overflow (two's complement), like MPI_SUM on int64/int32;
//  - bool: sum and max are logical or, min is logical and.
void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, int64_t count);

// data[i] = data[i] / divisor, the second half of avg. Floats divide in their compute type (halves in
// f32, rounded back once); integers truncate toward zero. bool has no avg and throws.
void divide_by(DType dtype, void* data, int64_t count, int divisor);

}  // namespace accel
