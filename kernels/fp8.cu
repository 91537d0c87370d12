// The FP8 quantisation kernel: one grid-stride pass that casts with the scale and reduces max |x| per
// block, then one atomicMax per block on the amax's bits (non-negative floats, +inf included, order as
// their bit patterns do as unsigned integers).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/fp8.h"

namespace accel::kernels {

namespace {

constexpr int kWarp = 32;

// |v| as the amax history stores it: NaN becomes +inf, so a NaN input shows as an overflow.
__device__ __forceinline__ float amax_of(float v) { return v != v ? __int_as_float(0x7f800000) : fabsf(v); }

template <class Out, class In>
__global__ void __launch_bounds__(kFp8Threads) fp8_quantize_kernel(Out* out, const In* in, int64_t n, float scale,
                                                                   unsigned int* amax_bits) {
  float local = 0.0f;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float v = static_cast<float>(in[i]);
    local = fmaxf(local, amax_of(v));
    if (out != nullptr) out[i] = Out(v * scale);
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) local = fmaxf(local, __shfl_down_sync(0xffffffffu, local, offset));
  __shared__ float warp_max[kFp8Threads / kWarp];
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  if (lane == 0) warp_max[warp] = local;
  __syncthreads();
  if (warp == 0) {
    local = lane < kFp8Threads / kWarp ? warp_max[lane] : 0.0f;
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      local = fmaxf(local, __shfl_down_sync(0xffffffffu, local, offset));
    if (lane == 0) atomicMax(amax_bits, __float_as_uint(local));
  }
}

template <class Out, class In>
void launch(void* out, const void* in, int64_t n, float scale, float* amax, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kFp8Threads - 1) / kFp8Threads, kFp8MaxBlocks);
  cuda::check_grid("fp8_quantize", blocks);
  fp8_quantize_kernel<Out, In><<<static_cast<unsigned>(blocks), kFp8Threads, 0, stream>>>(
      static_cast<Out*>(out), static_cast<const In*>(in), n, scale, reinterpret_cast<unsigned int*>(amax));
  cuda::check_launch("fp8_quantize");
}

}  // namespace

void launch_fp8_quantize(DType out_dtype, DType in_dtype, void* out, const void* in, int64_t n, float scale,
                         float* amax, cudaStream_t stream) {
  dispatch_floating(in_dtype, "fp8_quantize", [&]<class In>() {
    if (out_dtype == DType::f8_e4m3) launch<Float8E4M3, In>(out, in, n, scale, amax, stream);
    else if (out_dtype == DType::f8_e5m2) launch<Float8E5M2, In>(out, in, n, scale, amax, stream);
    else throw_unsupported_dtype("fp8_quantize", out_dtype, "an fp8 dtype (f8_e4m3, f8_e5m2)");
  });
}

}  // namespace accel::kernels
