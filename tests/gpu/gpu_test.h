// Helpers of the GPU tests: random inputs made on the CPU, per-dtype tolerances, and a comparison
// of a CUDA result against the CPU path's that treats NaN as equal to NaN.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "accel.h"
#include "../error_of.h"
#include "tensor/cuda/device.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel::gpu_test {

inline const Device kGpu = Device::cuda(0);

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> d{DType::f32, DType::f16, DType::bf16, DType::f64};
  return d;
}

inline const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> d{DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64, DType::i32};
  return d;
}

// Relative tolerance of a result computed in f32 (f64) and rounded to dtype: a few units in the
// last place of the stored type, since the GPU's exp/log/tanh may differ from glibc's by an ulp.
inline double rtol(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-6;
    case DType::f16: return 2e-3;   // one f16 ulp is 2^-10 ~ 1e-3
    case DType::bf16: return 1.6e-2;  // one bf16 ulp is 2^-7 ~ 8e-3
    default: return 0.0;
  }
}

// Standard normal values (integers: rounded, times 10) of any dtype, on device.
inline Tensor random(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randn(shape, gen, DType::f64);
  if (!is_floating(dtype)) x = nograd::mul(x, 10.0);
  return nograd::to_device(nograd::to_dtype(x, dtype), device);
}

// Values in [low, high) (f64 drawn, then cast), on device.
inline Tensor random_uniform(const Shape& shape, double low, double high, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  return nograd::to_device(nograd::to_dtype(uniform(shape, low, high, gen, DType::f64), dtype), device);
}

// Checks that got (any device) matches want (CPU): same shape and dtype, each element within
// atol + rtol * |want|; NaN matches NaN and infinities must agree exactly.
inline void check_close(const Tensor& got, const Tensor& want, double rel, double abs_tol = 0.0,
                        const std::string& what = "") {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const std::vector<double> g = nograd::to_dtype(nograd::to_device(got, Device::cpu()), DType::f64).to_vector<double>();
  const std::vector<double> w = nograd::to_dtype(want, DType::f64).to_vector<double>();
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    (std::isfinite(w[i]) && std::fabs(g[i] - w[i]) <= abs_tol + rel * std::fabs(w[i]));
    if (!ok && bad++ == 0) first_bad = static_cast<int64_t>(i);
  }
  if (bad > 0)
    FAIL_CHECK(fmt::format("{} of {} elements differ; first at {}: got {} want {}", bad, g.size(), first_bad,
                           g[static_cast<size_t>(first_bad)], w[static_cast<size_t>(first_bad)]));
}

using test_support::error_of;

}  // namespace accel::gpu_test
