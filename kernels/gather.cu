// Row gathers (embedding lookup, index_select) and embedding's deterministic backward. The gather
// copies whole rows as the widest unit (16 down to 1 bytes) that the row size and pointers allow; the
// backward gives each (output row, column) one thread that sums its rows in the order the host's
// counting sort gave, so it needs no atomics and matches the CPU's order.
#include <cstdint>
#include <string>

#include "kernels/convert.cuh"
#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "kernels/map.cuh"
#include "kernels/nn.h"

namespace accel::kernels {

namespace gather_detail {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // the gather loops over the rest (grid-stride)

template <class W, class I>
__global__ void __launch_bounds__(kThreads) gather_rows(W* out, const W* src, const I* index, int64_t size, int64_t n,
                                                        int64_t units, int64_t total) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; u < total; u += stride) {
    const int64_t row = u / units, c = u - row * units;
    const int64_t o = row / n, i = row - o * n;
    out[u] = src[(o * size + static_cast<int64_t>(index[i])) * units + c];
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) embedding_backward(T* grad_weight, const T* grad_out, const int64_t* order,
                                                               const int64_t* start, int64_t dim) {
  using C = compute_t<T>;
  const int64_t k = blockIdx.x, j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  C acc = 0;
  for (int64_t p = start[k], end = start[k + 1]; p < end; ++p) acc += load(grad_out[order[p] * dim + j]);
  grad_weight[k * dim + j] = store<T>(acc);
}

template <class W>
void gather_as(void* out, const void* src, const void* index, DType index_dtype, int64_t outer, int64_t size,
               int64_t n, int64_t row_bytes, cudaStream_t stream) {
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(W)), total = outer * n * units;
  const int64_t wanted = (total + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  if (index_dtype == DType::i64) {
    gather_rows<W, int64_t><<<blocks, kThreads, 0, stream>>>(static_cast<W*>(out), static_cast<const W*>(src),
                                                             static_cast<const int64_t*>(index), size, n, units, total);
  } else if (index_dtype == DType::i32) {
    gather_rows<W, int32_t><<<blocks, kThreads, 0, stream>>>(static_cast<W*>(out), static_cast<const W*>(src),
                                                             static_cast<const int32_t*>(index), size, n, units, total);
  } else {
    throw_unsupported_dtype("gather", index_dtype, "i64 or i32");
  }
  cuda::check_launch("gather");
}

}  // namespace gather_detail

void launch_gather_rows(void* out, const void* src, const void* index, DType index_dtype, int64_t outer, int64_t size,
                        int64_t n, int64_t row_bytes, cudaStream_t stream) {
  using namespace gather_detail;
  if (outer == 0 || n == 0 || row_bytes == 0) return;
  // The widest unit that divides the row and both base addresses.
  const uint64_t bits = static_cast<uint64_t>(row_bytes) | reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(src);
  if (bits % 16 == 0) gather_as<uint4>(out, src, index, index_dtype, outer, size, n, row_bytes, stream);
  else if (bits % 8 == 0) gather_as<uint2>(out, src, index, index_dtype, outer, size, n, row_bytes, stream);
  else if (bits % 4 == 0) gather_as<uint32_t>(out, src, index, index_dtype, outer, size, n, row_bytes, stream);
  else if (bits % 2 == 0) gather_as<uint16_t>(out, src, index, index_dtype, outer, size, n, row_bytes, stream);
  else gather_as<uint8_t>(out, src, index, index_dtype, outer, size, n, row_bytes, stream);
}

void launch_embedding_backward(DType dtype, void* grad_weight, const void* grad_out, const int64_t* order,
                               const int64_t* start, int64_t rows, int64_t dim, cudaStream_t stream) {
  using namespace gather_detail;
  if (rows == 0 || dim == 0) return;
  dispatch_floating(dtype, "embedding_backward", [&]<class T>() {
    const int64_t threads = dim < kThreads ? (dim + 31) / 32 * 32 : kThreads;
    const int64_t column_blocks = (dim + threads - 1) / threads;
    cuda::check_grid("embedding_backward", rows);
    if (column_blocks > 65535)
      throw Error("embedding_backward: dim " + std::to_string(dim) + " needs more than 65535 blocks of columns");
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(column_blocks));
    embedding_backward<T><<<grid, static_cast<unsigned>(threads), 0, stream>>>(
        static_cast<T*>(grad_weight), static_cast<const T*>(grad_out), order, start, dim);
    cuda::check_launch("embedding_backward");
  });
}

}  // namespace accel::kernels
