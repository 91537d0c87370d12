// Multi-tensor kernels: one launch walks a table of tensors (kernels/multi_tensor.h). Block b finds
// its tensor by a binary search over the slots' first blocks and updates that tensor's chunk
// b - first_block with the per-element math of kernels/optim_math.h.
#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/multi_tensor.h"

namespace accel::kernels {

namespace multi_tensor_detail {

__device__ __forceinline__ TensorSlot find_slot(const TensorSlot* table, int count) {
  const int64_t block = blockIdx.x;
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_block <= block) lo = mid;
    else hi = mid - 1;
  }
  return table[lo];
}

// Calls op(slot, i) for every element i of this block's chunk.
template <class Op>
__global__ void __launch_bounds__(kMultiTensorThreads) multi_tensor(const TensorSlot* table, int count, Op op) {
  const TensorSlot slot = find_slot(table, count);  // a copy: the stores below cannot alias it
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - slot.first_block) * kMultiTensorChunk;
  const int64_t end = begin + kMultiTensorChunk < slot.numel ? begin + kMultiTensorChunk : slot.numel;
  for (int64_t i = begin + threadIdx.x; i < end; i += kMultiTensorThreads) op(slot, i);
}

template <class T>
struct SgdOp {
  SgdCoeffs<compute_t<T>> k;
  __device__ void operator()(const TensorSlot& s, int64_t i) const {
    using C = compute_t<T>;
    T* p = static_cast<T*>(s.target);
    C* buf = static_cast<C*>(s.state1);
    C unused = 0;
    p[i] = store<T>(sgd_update(load(p[i]), load(static_cast<const T*>(s.grad)[i]), buf != nullptr ? buf[i] : unused, k));
  }
};

template <class T>
struct AdamWOp {
  AdamWCoeffs<compute_t<T>> k;
  __device__ void operator()(const TensorSlot& s, int64_t i) const {
    using C = compute_t<T>;
    T* p = static_cast<T*>(s.target);
    p[i] = store<T>(adamw_update(load(p[i]), load(static_cast<const T*>(s.grad)[i]), static_cast<C*>(s.state1)[i],
                                 static_cast<C*>(s.state2)[i], k));
  }
};

template <class T>
struct UnscaleOp {
  compute_t<T> inv_scale;
  int* found_nonfinite;
  __device__ void operator()(const TensorSlot& s, int64_t i) const {
    T* g = static_cast<T*>(s.target);
    bool finite = true;
    g[i] = store<T>(unscale_grad(load(g[i]), inv_scale, finite));
    if (!finite) *found_nonfinite = 1;  // every writer writes the same value
  }
};

template <class Op>
void launch(const char* name, const TensorSlot* table, int count, int64_t blocks, const Op& op, cudaStream_t stream) {
  if (count == 0 || blocks == 0) return;
  cuda::check_grid(name, blocks);
  multi_tensor<Op><<<static_cast<unsigned>(blocks), kMultiTensorThreads, 0, stream>>>(table, count, op);
  cuda::check_launch(name);
}

}  // namespace multi_tensor_detail

void launch_sgd_step(DType dtype, const TensorSlot* table, int count, int64_t blocks, const SgdCoeffs<double>& k,
                     cudaStream_t stream) {
  using namespace multi_tensor_detail;
  dispatch_floating(dtype, "sgd_step_", [&]<class T>() {
    launch("sgd_step_", table, count, blocks, SgdOp<T>{coeffs_as<compute_t<T>>(k)}, stream);
  });
}

void launch_adamw_step(DType dtype, const TensorSlot* table, int count, int64_t blocks, const AdamWCoeffs<double>& k,
                       cudaStream_t stream) {
  using namespace multi_tensor_detail;
  dispatch_floating(dtype, "adamw_step_", [&]<class T>() {
    launch("adamw_step_", table, count, blocks, AdamWOp<T>{coeffs_as<compute_t<T>>(k)}, stream);
  });
}

void launch_unscale(DType dtype, const TensorSlot* table, int count, int64_t blocks, double inv_scale,
                    int* found_nonfinite, cudaStream_t stream) {
  using namespace multi_tensor_detail;
  dispatch_floating(dtype, "unscale_and_check_", [&]<class T>() {
    launch("unscale_and_check_", table, count, blocks,
           UnscaleOp<T>{static_cast<compute_t<T>>(inv_scale), found_nonfinite}, stream);
  });
}

}  // namespace accel::kernels
