// The multi-tensor kernels (fused SGD and AdamW steps, the loss scaler's unscale-and-check): one
// launch updates a whole list of tensors, described by a table in device memory. Plain C++ for the
// host side and its tests.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/optim_math.h"

namespace accel::kernels {

// Elements one block updates; a tensor of n elements takes ceil(n / kMultiTensorChunk) blocks.
inline constexpr int64_t kMultiTensorChunk = 16384;
inline constexpr int kMultiTensorThreads = 256;

inline int64_t multi_tensor_blocks(int64_t numel) { return (numel + kMultiTensorChunk - 1) / kMultiTensorChunk; }

// One tensor of the list: the tensor updated in place (a param, or a grad for unscale), the grad, two
// state tensors (f32, or f64 for f64; unused ones null), the element count, and the first block of
// this tensor's launch; blocks first_block .. first_block + multi_tensor_blocks(numel) - 1 cover it.
struct TensorSlot {
  void* target;
  const void* grad;
  void* state1;
  void* state2;
  int64_t numel;
  int64_t first_block;
};

// table (device memory) holds `count` slots of tensors of `dtype`, in first_block order, covering
// `blocks` blocks. Coefficients come in f64 and are rounded to the compute type once (coeffs_as).
// SGD: state1 is the momentum buffer (null without momentum).
void launch_sgd_step(DType dtype, const TensorSlot* table, int count, int64_t blocks, const SgdCoeffs<double>& k,
                     cudaStream_t stream);
// AdamW: state1 is exp_avg, state2 exp_avg_sq.
void launch_adamw_step(DType dtype, const TensorSlot* table, int count, int64_t blocks, const AdamWCoeffs<double>& k,
                       cudaStream_t stream);
// Multiplies each target by inv_scale; sets *found_nonfinite (device memory) to 1 if any element was
// inf or NaN, and leaves it alone otherwise.
void launch_unscale(DType dtype, const TensorSlot* table, int count, int64_t blocks, double inv_scale,
                    int* found_nonfinite, cudaStream_t stream);

}  // namespace accel::kernels
