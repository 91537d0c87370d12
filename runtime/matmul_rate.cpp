// The matmul rate: a lookup in the published table for GPUs, a timed accel::matmul otherwise.
#include "runtime/matmul_rate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "accel_config.h"
#include "kernels/error.h"
#include "runtime/published_peaks.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/matmul.h"
#if ACCEL_WITH_CUDA
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"
#endif

namespace accel {

namespace {

void wait_for(Device device) {
#if ACCEL_WITH_CUDA
  if (device.is_cuda()) cuda::synchronize(device);
#else
  (void)device;
#endif
}

}  // namespace

MatmulRate measure_matmul_rate(Device device, DType dtype, int64_t n, int iters) {
  if (n < 1 || iters < 1)
    throw Error(fmt::format("measure_matmul_rate: n {} and iters {}, expected both >= 1", n, iters));
  Generator gen(0);
  const Tensor a = nograd::to_device(nograd::to_dtype(randn({n, n}, gen), dtype), device);
  const Tensor b = nograd::to_device(nograd::to_dtype(randn({n, n}, gen), dtype), device);
  Tensor c = nograd::matmul(a, b);  // the warm-up: allocations, a cuBLAS handle, page faults
  wait_for(device);
  std::vector<double> seconds;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    c = nograd::matmul(a, b);
    wait_for(device);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return {flop / median / 1e9, fmt::format("measured: {}^3 {} matmul on {}, median of {}", n, dtype_name(dtype),
                                           device.str(), iters)};
}

MatmulRate reference_matmul_rate(Device device, DType dtype) {
#if ACCEL_WITH_CUDA
  if (device.is_cuda()) {
    const std::string name = cuda::device_properties(device.index).name;
    if (const auto peaks = published_peaks(name)) {
      const double gflops = gemm_peak_gflops(*peaks, dtype_name(dtype));
      if (gflops > 0) return {gflops, fmt::format("published {} {} peak", peaks->gpu, dtype_name(dtype))};
    }
  }
#endif
  return measure_matmul_rate(device, dtype);
}

}  // namespace accel
