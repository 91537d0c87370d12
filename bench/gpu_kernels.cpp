// GPU kernel benchmarks, side by side in one run: GEMM through accel's nograd::matmul against cuBLASLt
// called directly (bf16, f16, f32 at 8192^3), elementwise add and casts on 256 MB against the HBM
// peak, row reductions, and softmax and layer norm over 256 MB. Times are CUDA events on the compute stream, medians after warm-ups.
//   gpu_kernels [--json PATH] [--peak-gbps 4800] [--size 8192] [--reps 20]
// Prints a table, and writes JSON (to PATH, or stdout's last line when PATH is "-").
#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "accel.h"
#include "kernels/cuda_check.h"
#include "tensor/cuda/allocator.h"
#include "tensor/cuda/blas.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/matmul.h"
#include "tensor/cuda/stream.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

struct Options {
  std::string json_path;
  double peak_gbps = 4800.0;  // H200 HBM3e, the datasheet's figure
  int64_t size = 8192;
  int reps = 20;
};

struct Result {
  std::string group, name, dtype, shape;
  double ms = 0;            // median time of one run
  double tflops = 0;        // GEMMs
  double gbps = 0;          // bandwidth-bound kernels: bytes read + written per second
  double fraction = 0;      // of the reference: cuBLASLt for GEMMs, the HBM peak for the rest
  double required = 0;      // the fraction the GPU proof requires, 0 when none
  std::string note;
};

// Median milliseconds of `reps` runs of f after `warmup` runs, each timed by events on the stream.
double median_ms(cudaStream_t stream, int warmup, int reps, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<cuda::Event> start, stop;
  for (int i = 0; i < reps; ++i) {
    start.emplace_back(true);
    stop.emplace_back(true);
  }
  for (int i = 0; i < reps; ++i) {
    start[static_cast<size_t>(i)].record(stream);
    f();
    stop[static_cast<size_t>(i)].record(stream);
  }
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    stop[static_cast<size_t>(i)].synchronize();
    ms.push_back(stop[static_cast<size_t>(i)].elapsed_ms_since(start[static_cast<size_t>(i)]));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// cuBLASLt called directly for row-major out[M, N] = a[M, K] @ b[K, N]: descriptors and the
// heuristic's algorithm are set up once, outside the timed loop.
class DirectGemm {
 public:
  DirectGemm(DType dtype, int64_t m, int64_t n, int64_t k, cudaStream_t stream) : stream_(stream) {
    const cudaDataType_t type = dtype == DType::f32 ? CUDA_R_32F : dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
    ACCEL_CUBLAS_CHECK(cublasLtCreate(&handle_), "cublasLtCreate");
    ACCEL_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace), "cudaMalloc(workspace)");
    ACCEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // Column-major view: out^T [N, M] = b^T [N, K] @ a^T [K, M], no transposes.
    ACCEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, type, n, k, n), "cublasLtMatrixLayoutCreate");
    ACCEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, type, k, m, k), "cublasLtMatrixLayoutCreate");
    ACCEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, type, n, m, n), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t bytes = kWorkspace;
    ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                            sizeof bytes),
                       "cublasLtMatmulPreferenceSetAttribute");
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, d_, d_, pref, 1, &heuristic_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    ACCEL_CUBLAS_CHECK(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw Error("DirectGemm: cuBLASLt returned no algorithm");
  }
  ~DirectGemm() {
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(op_);
    cudaFree(workspace_);
    cublasLtDestroy(handle_);
  }
  DirectGemm(const DirectGemm&) = delete;
  DirectGemm& operator=(const DirectGemm&) = delete;

  void run(void* out, const void* a, const void* b) {
    const float one = 1.0f, zero = 0.0f;
    ACCEL_CUBLAS_CHECK(cublasLtMatmul(handle_, op_, &one, b, a_, a, b_, &zero, out, d_, out, d_, &heuristic_.algo,
                                      workspace_, kWorkspace, stream_),
                       "cublasLtMatmul");
  }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

std::vector<Result> bench_gemm(const Options& opt, Device dev, cudaStream_t stream) {
  std::vector<Result> out;
  const int64_t s = opt.size;
  Generator gen(1);
  // Random operands (zeros would flatter the tensor cores' power draw), drawn once in f32.
  const Tensor a32 = nograd::to_device(uniform({s, s}, -1.0, 1.0, gen, DType::f32), dev);
  const Tensor b32 = nograd::to_device(uniform({s, s}, -1.0, 1.0, gen, DType::f32), dev);
  const double flops = 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s);
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    const Tensor a = nograd::to_dtype(a32, dtype), b = nograd::to_dtype(b32, dtype);
    Tensor direct_out = empty({s, s}, dtype, dev);
    DirectGemm direct(dtype, s, s, s, stream);
    const int reps = dtype == DType::f32 ? std::max(3, opt.reps / 4) : opt.reps;
    const double direct_ms =
        median_ms(stream, 3, reps, [&] { direct.run(direct_out.data_ptr(), a.data_ptr(), b.data_ptr()); });
    Tensor accel_out;
    const int64_t classic_before = cuda::classic_gemm_calls();
    const double accel_ms = median_ms(stream, 3, reps, [&] { accel_out = nograd::matmul(a, b); });
    const bool classic = cuda::classic_gemm_calls() != classic_before;
    // The two must agree, or the comparison means nothing.
    const double diff = nograd::max(nograd::abs(nograd::sub(nograd::to_dtype(accel_out, DType::f32),
                                                  nograd::to_dtype(direct_out, DType::f32))))
                            .item();
    if (!(diff <= 1e-2 * std::sqrt(static_cast<double>(s))))
      throw Error(fmt::format("gemm {}: accel and cuBLASLt results differ by {}", dtype_name(dtype), diff));
    const std::string shape = fmt::format("{0}x{0}x{0}", s);
    out.push_back({"gemm", "cublasLt direct", dtype_name(dtype), shape, direct_ms, flops / direct_ms / 1e9, 0, 1.0, 0, ""});
    out.push_back({"gemm", "accel nograd::matmul", dtype_name(dtype), shape, accel_ms, flops / accel_ms / 1e9, 0,
                   direct_ms / accel_ms, dtype == DType::bf16 ? 0.9 : 0.0,
                   classic ? "went to classic cuBLAS: cuBLASLt declined the layout" : ""});
  }
  return out;
}

Result bandwidth(const Options& opt, cudaStream_t stream, const std::string& group, const std::string& name,
                 DType dtype, const std::string& shape, double bytes, double required,
                 const std::function<void()>& f) {
  const double ms = median_ms(stream, 3, opt.reps, f);
  const double gbps = bytes / ms / 1e6;
  return {group, name, dtype_name(dtype), shape, ms, 0, gbps, gbps / opt.peak_gbps, required, ""};
}

std::vector<Result> bench_bandwidth(const Options& opt, Device dev, cudaStream_t stream) {
  std::vector<Result> out;
  const int64_t n32 = (int64_t{256} << 20) / 4;  // 256 MB of f32
  const int64_t n16 = (int64_t{256} << 20) / 2;  // 256 MB of bf16
  const double mb256 = static_cast<double>(int64_t{256} << 20);
  const Tensor x = full({n32}, 1.5, DType::f32, dev), y = full({n32}, -0.25, DType::f32, dev);
  const Tensor h = full({n16}, 0.75, DType::bf16, dev);
  Tensor r;
  out.push_back(bandwidth(opt, stream, "bandwidth", "device memcpy (reference)", DType::f32, "256 MB", 2 * mb256, 0,
                          [&] {
                            ACCEL_CUDA_CHECK(cudaMemcpyAsync(y.data_ptr(), x.data_ptr(), x.nbytes(),
                                                             cudaMemcpyDeviceToDevice, stream),
                                             "cudaMemcpyAsync");
                          }));
  out.push_back(bandwidth(opt, stream, "bandwidth", "add", DType::f32, "2 x 256 MB -> 256 MB", 3 * mb256, 0.8,
                          [&] { r = nograd::add(x, y); }));
  out.push_back(bandwidth(opt, stream, "bandwidth", "cast f32 -> bf16", DType::f32, "256 MB -> 128 MB", 1.5 * mb256,
                          0.8, [&] { r = nograd::to_dtype(x, DType::bf16); }));
  out.push_back(bandwidth(opt, stream, "bandwidth", "cast bf16 -> f32", DType::bf16, "256 MB -> 512 MB", 3 * mb256,
                          0.8, [&] { r = nograd::to_dtype(h, DType::f32); }));
  out.push_back(bandwidth(opt, stream, "bandwidth", "mul by scalar", DType::bf16, "256 MB -> 256 MB", 2 * mb256, 0,
                          [&] { r = nograd::mul(h, 3.0); }));
  // Row reductions read their input once.
  const Tensor m = nograd::view(x, {8192, n32 / 8192}), wide = nograd::view(x, {n32 / 1024, 1024});
  const Tensor mh = nograd::view(h, {8192, n16 / 8192});
  out.push_back(bandwidth(opt, stream, "reduce", "sum rows", DType::f32, "[8192, 8192]", mb256, 0,
                          [&] { r = nograd::sum(m, {1}); }));
  out.push_back(bandwidth(opt, stream, "reduce", "sum rows", DType::f32, "[65536, 1024]", mb256, 0,
                          [&] { r = nograd::sum(wide, {1}); }));
  out.push_back(bandwidth(opt, stream, "reduce", "sum all", DType::f32, "[67108864]", mb256, 0,
                          [&] { r = nograd::sum(x); }));
  out.push_back(bandwidth(opt, stream, "reduce", "max rows", DType::bf16, "[8192, 16384]", mb256, 0,
                          [&] { r = nograd::max(mh, {1}); }));
  return out;
}

// Softmax and layer norm read their input once and write their output once; their rows are the
// widths of transformer activations and attention scores.
std::vector<Result> bench_nn(const Options& opt, Device dev, cudaStream_t stream) {
  std::vector<Result> out;
  const double mb256 = static_cast<double>(int64_t{256} << 20);
  Generator gen(2);
  const Tensor x32 = nograd::to_device(uniform({65536, 1024}, -4.0, 4.0, gen, DType::f32), dev);
  const Tensor x16 = nograd::to_dtype(nograd::view(x32, {32768, 2048 * 2}), DType::bf16);
  const Tensor x16_wide = nograd::view(nograd::cat({x16, x16}, 0), {32768, 8192});  // 512 MB of bf16 in 8192-wide rows
  const Tensor w32 = full({1024}, 1.25, DType::f32, dev), b32 = full({1024}, 0.5, DType::f32, dev);
  const Tensor w16 = full({4096}, 1.25, DType::bf16, dev), b16 = full({4096}, 0.5, DType::bf16, dev);
  const Tensor grad32 = nograd::mul(x32, 0.5);
  Tensor r;
  out.push_back(bandwidth(opt, stream, "nn", "softmax", DType::f32, "[65536, 1024]", 2 * mb256, 0.7,
                          [&] { r = nograd::softmax(x32, -1); }));
  out.push_back(bandwidth(opt, stream, "nn", "softmax", DType::bf16, "[32768, 4096]", 2 * mb256, 0.7,
                          [&] { r = nograd::softmax(x16, -1); }));
  out.push_back(bandwidth(opt, stream, "nn", "log_softmax", DType::bf16, "[32768, 8192]", 4 * mb256, 0,
                          [&] { r = nograd::log_softmax(x16_wide, -1); }));
  const Tensor y32 = nograd::softmax(x32, -1);
  out.push_back(bandwidth(opt, stream, "nn", "softmax_backward", DType::f32, "[65536, 1024]", 3 * mb256, 0,
                          [&] { r = nograd::softmax_backward(grad32, y32, -1); }));
  out.push_back(bandwidth(opt, stream, "nn", "layer_norm", DType::f32, "[65536, 1024]", 2 * mb256, 0.7,
                          [&] { r = nograd::layer_norm(x32, w32, b32, 1e-5).out; }));
  out.push_back(bandwidth(opt, stream, "nn", "layer_norm", DType::bf16, "[32768, 4096]", 2 * mb256, 0.7,
                          [&] { r = nograd::layer_norm(x16, w16, b16, 1e-5).out; }));
  const nograd::LayerNormResult ln = nograd::layer_norm(x32, w32, b32, 1e-5);
  // Reads grad_out and x twice (the input grad, then the weight and bias grads), writes the input grad.
  out.push_back(bandwidth(opt, stream, "nn", "layer_norm_backward", DType::f32, "[65536, 1024]", 5 * mb256, 0, [&] {
    r = nograd::layer_norm_backward(grad32, x32, ln.mean, ln.rstd, w32, b32).grad_input;
  }));
  return out;
}

std::string json_of(const std::vector<Result>& results, const cuda::DeviceProperties& props, const Options& opt,
                    bool all_met) {
  std::string s = fmt::format("{{\"device\": \"{}\", \"peak_gbps\": {}, \"all_requirements_met\": {}, \"results\": [",
                              props.name, opt.peak_gbps, all_met ? "true" : "false");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    s += fmt::format(
        "{}{{\"group\": \"{}\", \"name\": \"{}\", \"dtype\": \"{}\", \"shape\": \"{}\", \"ms\": {:.4f}, "
        "\"tflops\": {:.1f}, \"gbps\": {:.1f}, \"fraction\": {:.3f}, \"required\": {}, \"met\": {}, "
        "\"note\": \"{}\"}}",
        i ? ", " : "", r.group, r.name, r.dtype, r.shape, r.ms, r.tflops, r.gbps, r.fraction, r.required,
        r.fraction >= r.required ? "true" : "false", r.note);
  }
  return s + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(fmt::format("gpu_kernels: {} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--json") opt.json_path = value();
    else if (arg == "--peak-gbps") opt.peak_gbps = std::stod(value());
    else if (arg == "--size") opt.size = std::stoll(value());
    else if (arg == "--reps") opt.reps = std::stoi(value());
    else {
      std::fprintf(stderr, "usage: gpu_kernels [--json PATH] [--peak-gbps GBPS] [--size N] [--reps N]\n");
      return 2;
    }
  }
  if (!cuda::is_available()) {
    std::printf("no CUDA device: GPU benchmarks skipped (%s)\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  try {
    const Device dev = Device::cuda(0);
    const cuda::DeviceGuard guard(dev);
    const cudaStream_t stream = cuda::compute_stream(dev);
    const cuda::DeviceProperties props = cuda::device_properties(0);
    std::vector<Result> results = bench_gemm(opt, dev, stream);
    const std::vector<Result> bw = bench_bandwidth(opt, dev, stream);
    results.insert(results.end(), bw.begin(), bw.end());
    const std::vector<Result> nn = bench_nn(opt, dev, stream);
    results.insert(results.end(), nn.begin(), nn.end());

    bool all_met = true;
    std::printf("%s, peak %.0f GB/s\n", props.name.c_str(), opt.peak_gbps);
    std::printf("%-9s %-27s %-5s %-21s %9s %9s %9s %9s %s\n", "group", "name", "dtype", "shape", "ms", "TFLOP/s",
                "GB/s", "fraction", "required");
    for (const Result& r : results) {
      const bool met = r.fraction >= r.required;
      all_met = all_met && met;
      const std::string required =
          r.required > 0 ? fmt::format(">= {:.2f} {}", r.required, met ? "met" : "NOT MET") : std::string();
      std::printf("%-9s %-27s %-5s %-21s %9.3f %9.1f %9.1f %9.3f %s %s\n", r.group.c_str(), r.name.c_str(),
                  r.dtype.c_str(), r.shape.c_str(), r.ms, r.tflops, r.gbps, r.fraction, required.c_str(),
                  r.note.c_str());
    }
    const std::string json = json_of(results, props, opt, all_met);
    if (opt.json_path == "-" || opt.json_path.empty()) {
      std::printf("%s\n", json.c_str());
    } else {
      std::ofstream(opt.json_path) << json << "\n";
    }
    const cuda::AllocatorStats stats = cuda::allocator_stats(dev);
    std::printf("allocator: %lld cudaMalloc calls, %.1f MB peak allocated, %.1f MB reserved\n",
                static_cast<long long>(stats.device_mallocs), static_cast<double>(stats.peak_allocated_bytes) / 1e6,
                static_cast<double>(stats.reserved_bytes) / 1e6);
    return all_met ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernels: %s\n", e.what());
    return 1;
  }
}
