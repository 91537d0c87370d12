// Raw FP8 entry points: operand checks, then the CPU's emulation or the CUDA kernels (tensor/cuda/fp8_gemm).
#include "tensor/nograd/fp8_gemm.h"

#include <fmt/format.h>

#include "accel_config.h"
#include "kernels/error.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/fp8_gemm.h"
#endif

namespace accel::nograd {

namespace {

float max_abs(const Tensor& t) {
  return t.numel() == 0 ? 0.0f : static_cast<float>(max(abs(to_dtype(t, DType::f32))).item());
}

void check_fp8_tensor(const char* what, const Fp8Tensor& q) {
  if (!q.data.defined() || !is_float8(q.data.dtype()) || q.data.dim() != 2)
    throw Error(fmt::format("fp8_gemm: {} must be a 2-d fp8 tensor, got {}", what,
                            q.data.defined() ? std::string(dtype_name(q.data.dtype())) + " " + shape_str(q.data.shape())
                                             : std::string("an undefined tensor")));
}

}  // namespace

Fp8Tensor quantize_fp8(const Tensor& t, float scale, DType fp8_dtype, float* amax) {
  if (!t.defined()) throw Error("quantize_fp8: got an undefined tensor");
  if (!is_float8(fp8_dtype))
    throw Error(fmt::format("quantize_fp8: dtype {} is not an fp8 dtype (f8_e4m3, f8_e5m2)", dtype_name(fp8_dtype)));
  if (!is_floating(t.dtype()) || is_float8(t.dtype()))
    throw_unsupported_dtype("quantize_fp8", t.dtype(), "a floating dtype (f64, f32, f16, bf16)");
  if (!(scale > 0.0f)) throw Error(fmt::format("quantize_fp8: scale {}, expected a positive value", scale));
  Fp8Tensor q;
  q.scale = scale;
  q.scale_inv = full({1}, static_cast<double>(1.0f / scale), DType::f32, t.device());
  if (t.device().is_cpu()) {
    if (amax != nullptr) *amax = max_abs(t);
    q.data = to_dtype(mul(to_dtype(t, DType::f32), static_cast<double>(scale)), fp8_dtype);
    return q;
  }
#if ACCEL_WITH_CUDA
  const Tensor in = contiguous(t);
  q.data = empty(t.shape(), fp8_dtype, t.device());
  const Tensor amax_t = empty({1}, DType::f32, t.device());
  cuda::fp8_quantize(q.data, in, scale, amax_t);
  if (amax != nullptr) *amax = static_cast<float>(amax_t.item());
  return q;
#else
  throw_no_cuda("quantize_fp8", t.device());
#endif
}

Tensor dequantize_fp8(const Fp8Tensor& q) {
  if (!q.data.defined() || !is_float8(q.data.dtype())) throw Error("dequantize_fp8: expected an fp8 tensor");
  return mul(to_dtype(q.data, DType::f32), static_cast<double>(1.0f / q.scale));
}

bool fp8_gemm_on_device([[maybe_unused]] Device device, int64_t m, int64_t n, int64_t k) {
  for (int64_t d : {m, n, k})
    if (d <= 0 || d % 16 != 0) return false;
#if ACCEL_WITH_CUDA
  return device.is_cuda() && cuda::fp8_gemm_supported(device);
#else
  return false;
#endif
}

void check_fp8_gemm_device(const char* op, Device device) {
  if (!device.is_cuda())
    throw Error(fmt::format("{}: FP8 GEMMs run on CUDA devices of sm_89 or newer, not on {}", op, device.str()));
#if ACCEL_WITH_CUDA
  cuda::check_fp8_gemm_device(op, device);
#else
  throw_no_cuda(op, device);
#endif
}

Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b, const Tensor& bias, DType out_dtype, float* amax) {
  check_fp8_tensor("a", a);
  check_fp8_tensor("b", b);
  const std::string shapes = fmt::format("{} {} x {} {}^T", dtype_name(a.data.dtype()), shape_str(a.data.shape()),
                                         dtype_name(b.data.dtype()), shape_str(b.data.shape()));
  if (a.data.size(1) != b.data.size(1))
    throw Error(fmt::format("fp8_gemm: inner dims differ: {}; expected [M, K] x [N, K]^T", shapes));
  if (a.data.device() != b.data.device())
    throw Error(fmt::format("fp8_gemm: devices differ: {} vs {}", a.data.device().str(), b.data.device().str()));
  if (out_dtype != DType::f32 && out_dtype != DType::bf16)
    throw Error(fmt::format("fp8_gemm: output dtype {}, expected f32 or bf16: {}", dtype_name(out_dtype), shapes));
  if (bias.defined() && (bias.shape() != Shape{b.data.size(0)} || bias.device() != a.data.device()))
    throw Error(fmt::format("fp8_gemm: bias {} on {}, expected [{}] on {}: {}", shape_str(bias.shape()),
                            bias.device().str(), b.data.size(0), a.data.device().str(), shapes));
  const Device device = a.data.device();
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  if (!fp8_gemm_on_device(device, m, n, k)) {
    // The emulation: the same dequantised values, one f32 GEMM, one rounding to out_dtype.
    const Tensor bias32 = bias.defined() ? to_dtype(bias, DType::f32) : bias;
    const Tensor out = to_dtype(linear(dequantize_fp8(a), dequantize_fp8(b), bias32), out_dtype);
    if (amax != nullptr) *amax = max_abs(out);
    return out;
  }
#if ACCEL_WITH_CUDA
  // A bias goes in as the GEMM's C: the output starts as the broadcast bias and the product adds to it.
  const Tensor out = bias.defined() ? contiguous(expand(to_dtype(bias, out_dtype), {m, n}))
                                    : empty({m, n}, out_dtype, device);
  const Tensor amax_t = amax != nullptr ? empty({1}, DType::f32, device) : Tensor();
  cuda::fp8_gemm(out, contiguous(a.data), contiguous(b.data), a.scale_inv, b.scale_inv, amax_t, bias.defined());
  if (amax != nullptr) *amax = static_cast<float>(amax_t.item());
  return out;
#else
  throw Error("fp8_gemm: unreachable without CUDA");
#endif
}

}  // namespace accel::nograd
