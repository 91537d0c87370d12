// The FP8 path on a GPU against the CPU's emulation: the quantise kernel's bytes and amax equal the
// CPU cast's bit for bit; cuBLASLt's FP8 GEMM (e4m3 x e4m3 and e4m3 x e5m2, bf16 and f32 out, with and
// without a bias) matches quantise-dequantise-f32-GEMM within a bound set by the order of the sums; the
// output amax equals the max of the output; fp8::linear's forward and grads match the CPU's; bad shapes
// and pre-sm_89 devices get errors that say why.
#include <cmath>

#include "autograd/engine.h"
#include "autograd/fp8/fp8_linear.h"
#include "tensor/cuda/fp8_gemm.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/fp8_gemm.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

bool device_has_fp8() { return cuda::fp8_gemm_supported(kGpu); }

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = nograd::contiguous(nograd::to_device(t, Device::cpu()));
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel());
}

float max_abs_cpu(const Tensor& t) {
  return static_cast<float>(nograd::max(nograd::abs(nograd::to_dtype(nograd::to_device(t, Device::cpu()), DType::f32))).item());
}

nograd::Fp8Tensor to_gpu(const nograd::Fp8Tensor& q) {
  return {nograd::to_device(q.data, kGpu), q.scale, nograd::to_device(q.scale_inv, kGpu)};
}

// The bound on |GPU - CPU emulation| for one output element: both sum the same K exact products of fp8
// values (each exact in f32), in different orders, with different partial-sum precision. A sum's
// rounding error is at most (terms) x (unit roundoff) x sum |products|. Hopper's FP8 tensor cores keep
// about 14 bits in their partial sums (DeepSeek-V3 report, sec. 3.3.2), and cuBLASLt without fast
// accumulation promotes them to f32 periodically (cublasLt.h, CUBLASLT_MATMUL_DESC_FAST_ACCUM; the
// interval is not documented: DeepSeek's kernels use 128 products). With 128, the worst case is 128 x
// 2^-14 = 2^-7 of sum |products|, the bound used; a bf16 output adds one bf16 ulp (2^-7 relative).
// Rounding errors add up like a random walk, far below the worst case, so a longer interval still
// fits; a wrong scale, a transposed operand or a swapped dtype is off by far more.
void check_gemm_close(const Tensor& got, const Tensor& want, const Tensor& magnitude, DType out_dtype,
                      const std::string& what) {
  INFO(what);
  const std::vector<double> g = nograd::to_dtype(nograd::to_device(got, Device::cpu()), DType::f64).to_vector<double>();
  const std::vector<double> w = nograd::to_dtype(want, DType::f64).to_vector<double>();
  const std::vector<double> m = nograd::to_dtype(magnitude, DType::f64).to_vector<double>();
  REQUIRE(g.size() == w.size());
  const double rounding = out_dtype == DType::bf16 ? 2.0 * std::ldexp(1.0, -8) : 0.0;
  int64_t bad = 0;
  double err2 = 0, want2 = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = std::fabs(g[i] - w[i]);
    if (!(d <= std::ldexp(m[i], -7) + rounding * std::fabs(w[i]))) ++bad;
    err2 += d * d;
    want2 += w[i] * w[i];
  }
  CHECK_MESSAGE(bad == 0, fmt::format("{} of {} elements beyond the bound", bad, g.size()));
  // Typical errors are far below the worst case: the RMS error must stay within 2^-8 of the RMS value
  // (bf16 rounding alone is about 2^-9 RMS), which a systematic error of any size breaks.
  CHECK(std::sqrt(err2) <= std::ldexp(std::sqrt(want2), -8));
}

struct Operands {
  nograd::Fp8Tensor a, b;  // on the CPU
};

// Random normal a [m, k] and b [n, k], quantised with the delayed-scaling scale fp8_max / amax.
Operands make_operands(int64_t m, int64_t n, int64_t k, DType a_dtype, DType b_dtype, uint64_t seed) {
  Generator gen(seed);
  const Tensor a = randn({m, k}, gen), b = nograd::mul(randn({n, k}, gen), 0.01);  // b: gradient-sized values
  const auto scale_for = [](const Tensor& t, DType dtype) {
    return (dtype == DType::f8_e4m3 ? kFloat8E4M3Max : kFloat8E5M2Max) / max_abs_cpu(t);
  };
  return {nograd::quantize_fp8(a, scale_for(a, a_dtype), a_dtype), nograd::quantize_fp8(b, scale_for(b, b_dtype), b_dtype)};
}

}  // namespace

TEST_CASE("fp8 quantise kernel: the CPU cast's bytes and the exact amax, saturating, NaN as inf") {
  Generator gen(11);
  for (DType in_dtype : {DType::f32, DType::bf16}) {
    for (DType fp8 : {DType::f8_e4m3, DType::f8_e5m2}) {
      INFO(dtype_name(in_dtype), " -> ", dtype_name(fp8));
      // Scaled so that about 1% of the values pass the format's max and saturate.
      const float scale = (fp8 == DType::f8_e4m3 ? kFloat8E4M3Max : kFloat8E5M2Max) / 2.5f;
      const Tensor x = nograd::to_dtype(randn({3, 1000, 17}, gen), in_dtype);  // odd size: a partial last block
      float cpu_amax = 0, gpu_amax = 0;
      const nograd::Fp8Tensor cpu = nograd::quantize_fp8(x, scale, fp8, &cpu_amax);
      const nograd::Fp8Tensor gpu = nograd::quantize_fp8(nograd::to_device(x, kGpu), scale, fp8, &gpu_amax);
      CHECK(gpu.data.device() == kGpu);
      CHECK(bytes_of(gpu.data) == bytes_of(cpu.data));
      CHECK(gpu_amax == cpu_amax);
      CHECK(static_cast<float>(nograd::to_device(gpu.scale_inv, Device::cpu()).item()) == 1.0f / scale);
    }
  }
  // A NaN input: NaN bytes where the CPU has them, and an amax of +inf (the history's overflow signal).
  std::vector<float> v(100, 1.0f);
  v[37] = std::nanf("");
  float amax = 0;
  const nograd::Fp8Tensor q = nograd::quantize_fp8(nograd::to_device(from_vector(v), kGpu), 1.0f, DType::f8_e4m3, &amax);
  CHECK(std::isinf(amax));
  CHECK(bytes_of(q.data) == bytes_of(nograd::quantize_fp8(from_vector(v), 1.0f, DType::f8_e4m3).data));
}

TEST_CASE("fp8 GEMM matches the CPU emulation: e4m3 x e4m3 and e4m3 x e5m2, bf16 and f32 out, amax") {
  if (!device_has_fp8()) {
    MESSAGE("this GPU is below sm_89: the FP8 GEMM cases are checked by the error test instead");
    return;
  }
  const int64_t m = 96, n = 160, k = 1024;  // K long enough for several promotions of the partial sums
  uint64_t seed = 20;
  for (DType b_dtype : {DType::f8_e4m3, DType::f8_e5m2}) {
    for (DType out_dtype : {DType::bf16, DType::f32}) {
      for (bool with_bias : {false, true}) {
        const std::string what = fmt::format("e4m3 x {} -> {}{}", dtype_name(b_dtype), dtype_name(out_dtype),
                                             with_bias ? " + bias" : "");
        const Operands ops = make_operands(m, n, k, DType::f8_e4m3, b_dtype, seed++);
        Generator gen(seed++);
        const Tensor bias = with_bias ? randn({n}, gen) : Tensor();
        float want_amax = 0, got_amax = 0;
        const Tensor want = nograd::fp8_gemm(ops.a, ops.b, bias, out_dtype, &want_amax);
        const Tensor got = nograd::fp8_gemm(to_gpu(ops.a), to_gpu(ops.b),
                                            with_bias ? nograd::to_device(bias, kGpu) : Tensor(), out_dtype, &got_amax);
        REQUIRE(got.device() == kGpu);
        const Tensor magnitude = nograd::linear(nograd::abs(nograd::dequantize_fp8(ops.a)),
                                                nograd::abs(nograd::dequantize_fp8(ops.b)),
                                                with_bias ? nograd::abs(bias) : Tensor());
        check_gemm_close(got, want, magnitude, out_dtype, what);
        // The output's amax: the max of what was written (bf16: of the f32 values before their rounding).
        const float got_max = max_abs_cpu(got);
        INFO(what, ": amax ", got_amax, " max |out| ", got_max, " emulation's ", want_amax);
        if (out_dtype == DType::f32) CHECK(got_amax == got_max);
        else CHECK(std::fabs(got_amax - got_max) <= std::ldexp(got_max, -8));
        CHECK(std::fabs(got_amax - want_amax) <= std::ldexp(want_amax, -6));
      }
    }
  }
  MESSAGE("amax by the extra pass in ", cuda::fp8_gemm_amax_passes(), " GEMMs (the rest by cuBLASLt)");
}

TEST_CASE("fp8::linear on the GPU matches the CPU's: output, input and weight grads, recorded amaxes") {
  if (!device_has_fp8()) return;
  Generator gen(31);
  const Tensor x0 = randn({4, 32, 256}, gen), w0 = nograd::mul(randn({128, 256}, gen), 0.05), b0 = randn({128}, gen);
  const Tensor g = nograd::mul(randn({4, 32, 128}, gen), 1e-3);
  fp8::RecipeOptions options;
  struct Run {
    Tensor out, gx, gw, gb;
    std::shared_ptr<fp8::LinearScaling> scaling;
  };
  auto run = [&](Device device) {
    Run r;
    r.scaling = std::make_shared<fp8::LinearScaling>(options.amax_history_len);
    // Scales from a first step's amaxes, so the second step quantises with real (non-unit) scales.
    for (int step = 0; step < 2; ++step) {
      Tensor x = nograd::to_device(x0, device), w = nograd::to_device(w0, device), b = nograd::to_device(b0, device);
      x.requires_grad_(true);
      w.requires_grad_(true);
      b.requires_grad_(true);
      r.out = fp8::linear(x, w, b, r.scaling, options);
      backward(r.out, nograd::to_device(g, device));
      r.gx = x.grad(), r.gw = w.grad(), r.gb = b.grad();
      if (step == 0)
        for (int role = 0; role < fp8::kRoleCount; ++role)
          (*r.scaling)[static_cast<fp8::Role>(role)].update(
              options, fp8::fp8_max(options.dtype_of(static_cast<fp8::Role>(role))));
    }
    return r;
  };
  const Run cpu = run(Device::cpu()), gpu = run(kGpu);
  for (int role = 0; role < fp8::kRoleCount; ++role) {
    INFO("role ", role);
    CHECK(gpu.scaling->roles[static_cast<size_t>(role)].history[0] == cpu.scaling->roles[static_cast<size_t>(role)].history[0]);
  }
  // Forward: K = 256; the grads: K = 128 (input) and K = 128 rows (weight). Loose versions of the GEMM
  // bound above, as relative RMS errors (the emulation's own test pins the formula).
  auto rms_rel = [](const Tensor& got, const Tensor& want) {
    const Tensor d = nograd::sub(nograd::to_device(got, Device::cpu()), want);
    const double e = std::sqrt(nograd::sum(nograd::mul(d, d)).item()), w = std::sqrt(nograd::sum(nograd::mul(want, want)).item());
    return e / w;
  };
  CHECK(rms_rel(gpu.out, cpu.out) <= 4e-3);
  CHECK(rms_rel(gpu.gx, cpu.gx) <= 4e-3);
  CHECK(rms_rel(gpu.gw, cpu.gw) <= 4e-3);
  CHECK(rms_rel(gpu.gb, cpu.gb) <= 1e-5);
}

TEST_CASE("fp8 GEMM errors: shapes off the multiple of 16, mixed dtypes, and GPUs below sm_89") {
  const cuda::DeviceProperties p = cuda::device_properties(0);
  if (!device_has_fp8()) {
    const std::string e = error_of([] { nograd::check_fp8_gemm_device("fp8_gemm", kGpu); });
    CHECK(e.find("sm_89") != std::string::npos);
    CHECK(e.find(p.name) != std::string::npos);
    CHECK_FALSE(nograd::fp8_gemm_on_device(kGpu, 16, 16, 16));
    return;
  }
  CHECK(nograd::fp8_gemm_on_device(kGpu, 16, 32, 48));
  CHECK_FALSE(nograd::fp8_gemm_on_device(kGpu, 16, 24, 48));
  const Tensor a = empty({32, 40}, DType::f8_e4m3, kGpu), b = empty({16, 40}, DType::f8_e4m3, kGpu);
  const Tensor one = ones({1}, DType::f32, kGpu), out = empty({32, 16}, DType::f32, kGpu);
  std::string e = error_of([&] { cuda::fp8_gemm(out, a, b, one, one, Tensor()); });
  CHECK(e.find("K = 40") != std::string::npos);
  CHECK(e.find("[32, 40]") != std::string::npos);
  const Tensor a5 = empty({32, 48}, DType::f8_e5m2, kGpu), b5 = empty({16, 48}, DType::f8_e5m2, kGpu);
  e = error_of([&] { cuda::fp8_gemm(out, a5, b5, one, one, Tensor()); });
  CHECK(e.find("f8_e4m3 x f8_e5m2") != std::string::npos);
  // Through the tensor entry point, an off shape runs the emulation on the device instead.
  const nograd::Fp8Tensor qa{empty({32, 40}, DType::f8_e4m3, kGpu), 1.0f, one}, qb{empty({16, 40}, DType::f8_e4m3, kGpu), 1.0f, one};
  CHECK(nograd::fp8_gemm(qa, qb, Tensor(), DType::f32).device() == kGpu);
}
