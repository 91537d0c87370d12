// Dropout: each thread draws one Philox block and decides the four elements it covers, element i
// with word i % 4 of block offset + i / 4, exactly as dropout_keep (kernels/nn_math.h) does on the CPU.
#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/nn.h"
#include "kernels/nn_math.h"

namespace accel::kernels {

namespace dropout_detail {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <class T>
__global__ void __launch_bounds__(kThreads) dropout(T* out, bool* keep_mask, const T* x, int64_t n, float p,
                                                    compute_t<T> scale, uint64_t seed, uint64_t offset) {
  const int64_t blocks = (n + 3) / 4, stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; b < blocks; b += stride) {
    const Philox4 r = philox4x32(seed, offset + static_cast<uint64_t>(b), 0);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = 4 * b + lane;
      if (i < n) {
        const bool keep = dropout_keep_word(r.v[lane], p);
        keep_mask[i] = keep;
        out[i] = store<T>(dropout_elem(static_cast<compute_t<T>>(load(x[i])), keep, scale));
      }
    }
  }
}

}  // namespace dropout_detail

void launch_dropout(DType dtype, void* out, bool* keep_mask, const void* x, int64_t n, float p, double scale,
                    uint64_t seed, uint64_t offset, cudaStream_t stream) {
  using namespace dropout_detail;
  if (n == 0) return;
  dispatch_floating(dtype, "dropout", [&]<class T>() {
    const int64_t wanted = ((n + 3) / 4 + kThreads - 1) / kThreads;
    const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
    dropout<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(out), keep_mask, static_cast<const T*>(x), n, p,
                                                static_cast<compute_t<T>>(scale), seed, offset);
    cuda::check_launch("dropout");
  });
}

}  // namespace accel::kernels
