// Launchers of the elementwise kernels (binary, unary, compare, where, casts, fills and in-place
// updates), declared in plain C++ for tensor/cuda. Each queues one kernel on stream over the layout
// in args (operand 0 is the output); dtypes are checked by the op entry points before this.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/dtype.h"
#include "kernels/elementwise_math.h"
#include "kernels/strided_args.h"

namespace accel::kernels {

void launch_binary(BinaryOp op, DType dtype, const StridedArgs<3>& args, cudaStream_t stream);
void launch_unary(UnaryOp op, DType dtype, const StridedArgs<2>& args, cudaStream_t stream);
// out is bool; a and b have in_dtype.
void launch_compare(CompareOp op, DType in_dtype, const StridedArgs<3>& args, cudaStream_t stream);
// Operands: out, cond (bool), a, b.
void launch_where(DType dtype, const StridedArgs<4>& args, cudaStream_t stream);
void launch_logical_not(const StridedArgs<2>& args, cudaStream_t stream);
void launch_isfinite(DType in_dtype, const StridedArgs<2>& args, cudaStream_t stream);
// Operands: out, grad, x.
void launch_tanh_backward(DType dtype, const StridedArgs<3>& args, cudaStream_t stream);
void launch_gelu_backward(DType dtype, const StridedArgs<3>& args, cudaStream_t stream);
// Operands: self (also read), self, other: self = self + alpha * other.
void launch_add_scaled(DType dtype, const StridedArgs<3>& args, double alpha, cudaStream_t stream);
// Operands: self, self: self = self * value.
void launch_scale(DType dtype, const StridedArgs<2>& args, double value, cudaStream_t stream);
// Writes value, already converted to dtype on the host and given by its bytes, to every element.
void launch_fill(DType dtype, const StridedArgs<1>& args, const void* value, cudaStream_t stream);
// out (out_dtype) = in (in_dtype) converted as cpu::convert does.
void launch_cast(DType out_dtype, DType in_dtype, const StridedArgs<2>& args, cudaStream_t stream);

}  // namespace accel::kernels
