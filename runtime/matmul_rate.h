// The machine's matmul rate, the reference a training step's achieved FLOP/s is a fraction of (its
// MFU): the published dense peak of a known GPU in the compute dtype, else a plain square matmul
// through accel's own op, timed once on the device.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "tensor/device.h"

namespace accel {

struct MatmulRate {
  double gflops = 0;
  // "published H200 SXM bf16 peak" or "measured: 1024^3 f32 matmul, median of 5".
  std::string source;
};

// The median rate of n x n x n matmuls in dtype on device (2 n^3 FLOP each), after one warm-up.
MatmulRate measure_matmul_rate(Device device, DType dtype = DType::f32, int64_t n = 1024, int iters = 5);
// The published peak when device is a GPU the table knows (runtime/published_peaks.h) and it lists
// dtype, else measure_matmul_rate.
MatmulRate reference_matmul_rate(Device device, DType dtype = DType::f32);

}  // namespace accel
