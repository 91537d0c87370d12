// The CPU side of the raw FP8 ops (tensor/nograd/fp8_gemm.h): quantise is the scaled cast with the exact
// amax, dequantise multiplies by 1 / scale, and the emulated FP8 GEMM is an f32 GEMM of the dequantised
// values (checked against an f64 sum of the decoded fp8 codes) rounded once; bad input is named, and the
// CPU never claims the FP8 GEMM. The CUDA kernels are held to these results in tests/gpu/test_fp8.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "accel.h"
#include "../error_of.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/fp8_gemm.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

using test_support::error_of;

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  return std::vector<uint8_t>(p, p + t.numel());
}

// Same dtype, shape and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ac = nograd::contiguous(a), bc = nograd::contiguous(b);
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// Element i of q's codes, decoded by kernels/float8.h.
float raw(const nograd::Fp8Tensor& q, int64_t i) {
  const uint8_t b = static_cast<const uint8_t*>(q.data.data_ptr())[i];
  return q.data.dtype() == DType::f8_e4m3 ? float8_bits_to_float<E4M3Format>(b) : float8_bits_to_float<E5M2Format>(b);
}

// Its value, scaled in f64.
double decoded(const nograd::Fp8Tensor& q, int64_t i) { return static_cast<double>(raw(q, i)) / static_cast<double>(q.scale); }

}  // namespace

TEST_CASE("quantize_fp8 on the CPU: the scaled cast, the exact amax, 1 / scale, and dequantise") {
  Generator gen(3);
  const Tensor x = nograd::mul(randn({40, 24}, gen), 3.0);
  for (DType fp8 : {DType::f8_e4m3, DType::f8_e5m2}) {
    INFO(dtype_name(fp8));
    const float scale = 37.5f;  // large enough that some values saturate
    float amax = -1;
    const nograd::Fp8Tensor q = nograd::quantize_fp8(x, scale, fp8, &amax);
    CHECK(q.data.dtype() == fp8);
    CHECK(q.scale == scale);
    CHECK(static_cast<float>(q.scale_inv.item()) == 1.0f / scale);
    CHECK(amax == static_cast<float>(nograd::max(nograd::abs(x)).item()));
    CHECK(bytes_of(q.data) == bytes_of(nograd::to_dtype(nograd::mul(x, static_cast<double>(scale)), fp8)));
    const std::vector<float> deq = nograd::dequantize_fp8(q).to_vector<float>();
    for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(deq[static_cast<size_t>(i)] == raw(q, i) * (1.0f / scale));
  }
  CHECK(error_of([&] { (void)nograd::quantize_fp8(x, 1.0f, DType::bf16); }).find("bf16 is not an fp8 dtype") !=
        std::string::npos);
  CHECK(error_of([&] { (void)nograd::quantize_fp8(x, 0.0f, DType::f8_e4m3); }).find("scale 0") != std::string::npos);
  CHECK(error_of([&] { (void)nograd::quantize_fp8(nograd::to_dtype(x, DType::f8_e4m3), 1.0f, DType::f8_e4m3); })
            .find("quantize_fp8") != std::string::npos);
}

TEST_CASE("the emulated FP8 GEMM is an f32 GEMM of the dequantised values, rounded once, with its amax") {
  Generator gen(5);
  const int64_t m = 24, n = 20, k = 72;
  const Tensor a = randn({m, k}, gen), b = nograd::mul(randn({n, k}, gen), 0.01), bias = randn({n}, gen);
  const nograd::Fp8Tensor qa = nograd::quantize_fp8(a, 448.0f / 4.0f, DType::f8_e4m3);
  const nograd::Fp8Tensor qb = nograd::quantize_fp8(b, 57344.0f / 0.04f, DType::f8_e5m2);
  float amax = 0;
  const Tensor out = nograd::fp8_gemm(qa, qb, bias, DType::f32, &amax);
  REQUIRE(out.shape() == Shape{m, n});
  const std::vector<float> got = out.to_vector<float>();
  const std::vector<float> bias_v = bias.to_vector<float>();
  // Against an f64 sum of the decoded codes: within the f32 GEMM's rounding, K u sum |terms|.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = bias_v[static_cast<size_t>(j)], magnitude = std::fabs(want);
      for (int64_t q = 0; q < k; ++q) {
        const double t = decoded(qa, i * k + q) * decoded(qb, j * k + q);
        want += t;
        magnitude += std::fabs(t);
      }
      REQUIRE(std::fabs(got[static_cast<size_t>(i * n + j)] - want) <= static_cast<double>(k + 2) * std::ldexp(magnitude, -24));
    }
  CHECK(amax == static_cast<float>(nograd::max(nograd::abs(out)).item()));
  // bf16 out: the f32 result rounded once, not a bf16 GEMM.
  CHECK(same_bits(nograd::fp8_gemm(qa, qb, bias, DType::bf16), nograd::to_dtype(out, DType::bf16)));
  // Without a bias: the same product.
  CHECK(same_bits(nograd::fp8_gemm(qa, qb, Tensor(), DType::f32),
                  nograd::linear(nograd::dequantize_fp8(qa), nograd::dequantize_fp8(qb), Tensor())));
}

TEST_CASE("fp8_gemm names bad operands, and the CPU never runs the FP8 GEMM") {
  Generator gen(7);
  const nograd::Fp8Tensor a = nograd::quantize_fp8(randn({16, 32}, gen), 1.0f, DType::f8_e4m3);
  const nograd::Fp8Tensor b = nograd::quantize_fp8(randn({16, 48}, gen), 1.0f, DType::f8_e4m3);
  CHECK(error_of([&] { (void)nograd::fp8_gemm(a, b, Tensor(), DType::f32); }).find("inner dims differ: f8_e4m3 [16, 32]") !=
        std::string::npos);
  CHECK(error_of([&] { (void)nograd::fp8_gemm(a, a, Tensor(), DType::f16); }).find("output dtype f16") !=
        std::string::npos);
  CHECK(error_of([&] { (void)nograd::fp8_gemm(a, a, zeros({3}), DType::f32); }).find("bias [3]") != std::string::npos);
  const nograd::Fp8Tensor not_fp8{randn({16, 32}, gen), 1.0f, ones({1})};
  CHECK(error_of([&] { (void)nograd::fp8_gemm(not_fp8, a, Tensor(), DType::f32); }).find("2-d fp8 tensor, got f32") !=
        std::string::npos);
  CHECK_FALSE(nograd::fp8_gemm_on_device(Device::cpu(), 16, 16, 16));
  CHECK(error_of([] { nograd::check_fp8_gemm_device("fp8 recipe", Device::cpu()); }).find("fp8 recipe: FP8 GEMMs run on CUDA devices of sm_89 or newer, not on cpu") != std::string::npos);
}
