// accel bench precision: each row is timed as the median of `iters` runs after `warmup` untimed ones,
// with the device synchronised around every run so a GPU row times whole kernels.
#include "bench/lib/precision_bench.h"

#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include "accel_config.h"
#include "autograd/engine.h"
#include "autograd/fp8/fp8_linear.h"
#include "autograd/functions.h"
#include "runtime/published_peaks.h"
#include "kernels/error.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "optim/adamw.h"
#include "runtime/accelerator.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/fp8_gemm.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/optim_ops.h"
#if ACCEL_WITH_CUDA
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"
#endif

namespace accel::bench {

namespace {

using Clock = std::chrono::steady_clock;

void synchronize([[maybe_unused]] Device device) {
#if ACCEL_WITH_CUDA
  if (device.is_cuda()) cuda::synchronize(device);
#endif
}

// Median seconds of one run of f on device.
double median_seconds(Device device, int warmup, int iters, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  synchronize(device);
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    f();
    synchronize(device);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// What a device is and the references its rows are shown against.
struct DeviceReference {
  PrecisionDevice info;
  std::optional<PublishedPeaks> peaks;  // known GPUs
};

DeviceReference describe(Device device) {
  DeviceReference d;
  d.info.device = device.str();
  if (device.is_cpu()) {
    d.info.name = cpu_model();
    d.info.reference = "measured";
    return d;
  }
#if ACCEL_WITH_CUDA
  d.info.name = cuda::device_properties(device.index).name;
#else
  d.info.name = "unknown";
#endif
  d.peaks = published_peaks(d.info.name);
  d.info.reference = d.peaks ? "published" : "none";
  return d;
}

// The raw Eigen f32 GEMM of n x n matrices, with the same OpenMP threads as accel's CPU ops.
double eigen_gemm_seconds(int64_t n, int warmup, int iters) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Index size = static_cast<Eigen::Index>(n);
  const Matrix a = Matrix::Random(size, size), b = Matrix::Random(size, size);
  Matrix c(size, size);
  return median_seconds(Device::cpu(), warmup, iters, [&] { c.noalias() = a * b; });
}

// memcpy of `bytes`, split over the OpenMP threads as accel's elementwise loops are.
double memcpy_seconds(int64_t bytes, int warmup, int iters) {
  const size_t total = static_cast<size_t>(bytes);
  std::unique_ptr<char[]> src(new char[total]), dst(new char[total]);
  std::memset(src.get(), 1, total);
  std::memset(dst.get(), 0, total);
  return median_seconds(Device::cpu(), warmup, iters, [&] {
#pragma omp parallel
    {
      const size_t threads = static_cast<size_t>(omp_get_num_threads());
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      const size_t begin = total * t / threads, end = total * (t + 1) / threads;
      std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
    }
  });
}

// The setup and the timed step of one fp8_linear row.
struct LinearStep {
  std::function<void()> make, run;
};

class Runner {
 public:
  Runner(const PrecisionOptions& options, PrecisionReport& report, const std::function<void(const PrecisionRow&)>& on_row)
      : o_(options), report_(report), on_row_(on_row) {}

  void run(Device device) {
    const DeviceReference ref = describe(device);
    report_.devices.push_back(ref.info);
    gemm(device, ref);
    fp8_linear(device);
    bandwidth(device, ref);
    train_step(device, ref);
  }

 private:
  void add(PrecisionRow row) {
    report_.rows.push_back(std::move(row));
    if (on_row_) on_row_(report_.rows.back());
  }

  // Times f into row (work: FLOPs or bytes per run) and adds it. An op this device cannot run makes
  // the row unavailable with the op's message, so one missing kernel does not end the whole table.
  // finish, if set, completes a measured row (a reference or note that needs its rate) before it is shown.
  void measure(PrecisionRow row, Device device, double work, const std::function<void()>& make,
               const std::function<void()>& f, const std::function<void(PrecisionRow&)>& finish = {}) {
    try {
      if (make) make();
      const double s = median_seconds(device, o_.warmup, o_.iters, f);
      row.time_us = s * 1e6;
      row.rate = work / s / 1e9;
      if (finish) finish(row);
    } catch (const Error& e) {
      row.available = false;
      row.note = e.what();
    }
    add(std::move(row));
  }

  void gemm(Device device, const DeviceReference& ref) {
    Generator gen(0);
    for (int64_t n : o_.gemm_sizes) {
      const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const std::string shape = fmt::format("{}x{}x{}", n, n, n);
      double eigen_gflops = 0;
      if (device.is_cpu()) {
        const double s = eigen_gemm_seconds(n, o_.warmup, o_.iters);
        eigen_gflops = flops / s / 1e9;
        add({device.str(), "gemm", "eigen f32 gemm", "f32", shape, s * 1e6, eigen_gflops, "GFLOP/s", eigen_gflops,
             "eigen f32 gemm (measured)", true, "the reference: raw Eigen, same threads"});
      }
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        PrecisionRow row{device.str(), "gemm", "matmul", dtype_name(dtype), shape, 0, 0, "GFLOP/s", 0, "", true, ""};
        set_gemm_reference(row, device, ref, eigen_gflops);
        Tensor a, b;
        measure(
            row, device, flops, [&] { a = randn({n, n}, gen, dtype, device), b = randn({n, n}, gen, dtype, device); },
            [&] { (void)nograd::matmul(a, b); });
      }
      fp8_gemm(device, ref, n, flops, shape, eigen_gflops);
    }
  }

  // A GEMM row's reference: Eigen's f32 GEMM measured on the CPU, the published peak of its dtype on a GPU.
  static void set_gemm_reference(PrecisionRow& row, Device device, const DeviceReference& ref, double eigen_gflops) {
    if (device.is_cpu()) {
      row.reference = eigen_gflops;
      row.reference_name = "eigen f32 gemm (measured)";
    } else if (ref.peaks) {
      row.reference = gemm_peak_gflops(*ref.peaks, row.dtype);
      row.reference_name = ref.peaks->gpu + " published";
    }
  }

  // The FP8 GEMM of e4m3 operands with a bf16 output, on operands quantised beforehand: cuBLASLt's on a
  // GPU of sm_89 or newer, against the published FP8 peak; the emulation (dequantise, f32 GEMM) on the
  // CPU, against Eigen's f32 GEMM. The note compares it with the bf16 matmul row of the same size.
  void fp8_gemm(Device device, const DeviceReference& ref, int64_t n, double flops, const std::string& shape,
                double eigen_gflops) {
    PrecisionRow row{device.str(), "gemm", "fp8 gemm", "f8_e4m3", shape, 0, 0, "GFLOP/s", 0, "", true, ""};
    set_gemm_reference(row, device, ref, eigen_gflops);
    Generator gen(3);
    nograd::Fp8Tensor a, b;
    measure(
        row, device, flops,
        [&] {
          if (device.is_cuda()) nograd::check_fp8_gemm_device("bench precision fp8 gemm", device);
          a = nograd::quantize_fp8(randn({n, n}, gen, DType::f32, device), 100.0f, DType::f8_e4m3);
          b = nograd::quantize_fp8(randn({n, n}, gen, DType::f32, device), 100.0f, DType::f8_e4m3);
        },
        [&] { (void)nograd::fp8_gemm(a, b, Tensor(), DType::bf16); },
        [&](PrecisionRow& done) {
          const std::string how =
              device.is_cpu() ? "emulated (dequantise, f32 GEMM)" : "cuBLASLt FP8, e4m3 x e4m3 -> bf16";
          done.note = how;
          for (const PrecisionRow& r : report_.rows)
            if (r.available && r.device == done.device && r.name == "matmul" && r.dtype == "bf16" && r.shape == shape)
              done.note = fmt::format("{}; {:.2f}x the bf16 matmul", how, done.rate / r.rate);
        });
  }

  // One Linear's forward and backward (y = x W^T + b, then dx, dW and db: 6 n^3 FLOPs) with n x n
  // operands in f32, in bf16, and through fp8::linear (f32 in and out, e4m3 and e5m2 inside: on the
  // CPU the emulation, on an sm_89+ GPU the FP8 GEMMs). The f32 row is the others' reference.
  void fp8_linear(Device device) {
    for (int64_t n : o_.gemm_sizes) {
      const double flops = 6.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const std::string shape = fmt::format("{}x{}x{}", n, n, n);
      double f32_rate = 0;
      for (DType dtype : {DType::f32, DType::bf16, DType::f8_e4m3}) {
        PrecisionRow row{device.str(), "fp8_linear", "linear fwd+bwd", dtype_name(dtype), shape, 0, 0, "GFLOP/s",
                         f32_rate, "f32 linear fwd+bwd (measured)", true, ""};
        const bool fp8 = is_float8(dtype);
        if (fp8)
          row.note = nograd::fp8_gemm_on_device(device, n, n, n) ? "fp8::linear on cuBLASLt FP8 GEMMs, HYBRID"
                                                                 : "fp8::linear emulated (quantise, f32 GEMMs), HYBRID";
        const LinearStep step = linear_step(device, n, dtype);
        measure(row, device, flops, step.make, step.run, [&](PrecisionRow& done) {
          if (dtype == DType::f32) done.reference = f32_rate = done.rate;  // the reference of its size
        });
      }
    }
  }

  LinearStep linear_step(Device device, int64_t n, DType dtype) {
    struct State {
      Tensor x, w, b, g;
      fp8::RecipeOptions recipe;
      std::shared_ptr<fp8::LinearScaling> scaling;
    };
    auto st = std::make_shared<State>();
    const bool fp8 = is_float8(dtype);
    auto run = [st, fp8] {
      for (Tensor* t : {&st->x, &st->w, &st->b}) t->set_grad(Tensor());
      const Tensor y = fp8 ? fp8::linear(st->x, st->w, st->b, st->scaling, st->recipe) : linear(st->x, st->w, st->b);
      backward(y, st->g);
    };
    auto make = [st, fp8, run, device, n, dtype] {
      Generator gen(4);
      const DType leaf = fp8 ? DType::f32 : dtype;
      st->x = randn({n, n}, gen, leaf, device);
      st->w = nograd::mul(randn({n, n}, gen, leaf, device), 0.03);
      st->b = randn({n}, gen, leaf, device);
      st->g = randn({n, n}, gen, leaf, device);
      for (Tensor* t : {&st->x, &st->w, &st->b}) t->requires_grad_(true);
      if (!fp8) return;
      // One step's amaxes, then the recipe's scales: the timed runs quantise as training does.
      st->scaling = std::make_shared<fp8::LinearScaling>(st->recipe.amax_history_len);
      run();
      for (int role = 0; role < fp8::kRoleCount; ++role) {
        const auto r = static_cast<fp8::Role>(role);
        (*st->scaling)[r].update(st->recipe, fp8::fp8_max(st->recipe.dtype_of(r)));
      }
    };
    return {make, run};
  }

  // A row of bytes read plus written per second, against memcpy's (CPU) or the published memory
  // bandwidth (known GPUs).
  PrecisionRow bandwidth_row(Device device, const DeviceReference& ref, double memcpy_gbs, std::string group,
                             std::string name, DType dtype) {
    PrecisionRow row{device.str(), std::move(group), std::move(name), dtype_name(dtype), std::to_string(o_.elements),
                     0, 0, "GB/s", 0, "", true, ""};
    if (device.is_cpu()) {
      row.reference = memcpy_gbs;
      row.reference_name = "memcpy (measured)";
    } else if (ref.peaks) {
      row.reference = ref.peaks->memory_gbs;
      row.reference_name = ref.peaks->gpu + " published";
    }
    return row;
  }

  void bandwidth(Device device, const DeviceReference& ref) {
    const int64_t n = o_.elements;
    const double count = static_cast<double>(n);
    double memcpy_gbs = 0;
    if (device.is_cpu()) {
      const double bytes = 4.0 * count;
      const double s = memcpy_seconds(n * 4, o_.warmup, o_.iters);
      memcpy_gbs = 2.0 * bytes / s / 1e9;
      add({device.str(), "elementwise", "memcpy", "f32", std::to_string(n), s * 1e6, memcpy_gbs, "GB/s", memcpy_gbs,
           "memcpy (measured)", true, "the reference: bytes read + written, same threads"});
    }
    Generator gen(1);
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      const double bytes = 3.0 * static_cast<double>(dtype_size(dtype)) * count;
      Tensor a, b;
      const auto make = [&] {
        if (!a.defined()) a = randn({n}, gen, dtype, device), b = randn({n}, gen, dtype, device);
      };
      measure(bandwidth_row(device, ref, memcpy_gbs, "elementwise", "add", dtype), device, bytes, make,
              [&] { (void)nograd::add(a, b); });
      measure(bandwidth_row(device, ref, memcpy_gbs, "elementwise", "mul", dtype), device, bytes, make,
              [&] { (void)nograd::mul(a, b); });
    }
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      // The loss scaler's pass over the grads: read, check, scale, write. inv_scale 1 keeps the values
      // finite however often it runs, and costs what any other scale does.
      Tensor grad;
      measure(bandwidth_row(device, ref, memcpy_gbs, "unscale", "unscale_and_check_", dtype), device,
              2.0 * static_cast<double>(dtype_size(dtype)) * count,
              [&] { grad = randn({n}, gen, dtype, device); }, [&] { (void)nograd::unscale_and_check_({grad}, 1.0); });
    }
    for (DType to : {DType::f16, DType::bf16}) {
      const double bytes = count * static_cast<double>(4 + dtype_size(to));
      Tensor f32, half;
      const auto make = [&] {
        if (!f32.defined()) f32 = randn({n}, gen, DType::f32, device), half = nograd::to_dtype(f32, to);
      };
      measure(bandwidth_row(device, ref, memcpy_gbs, "cast", fmt::format("f32->{}", dtype_name(to)), DType::f32),
              device, bytes, make, [&] { (void)nograd::to_dtype(f32, to); });
      measure(bandwidth_row(device, ref, memcpy_gbs, "cast", fmt::format("{}->f32", dtype_name(to)), to), device,
              bytes, make, [&] { (void)nograd::to_dtype(half, DType::f32); });
    }
  }

  void train_step(Device device, const DeviceReference& ref) {
    const std::vector<int64_t>& w = o_.mlp_widths;
    const double flops = mlp_step_flops(w, o_.mlp_batch);
    const std::string shape = fmt::format("{} b{}", fmt::join(w, "-"), o_.mlp_batch);
    const double eigen_peak = peak_gemm_reference(device);
    for (const NamedValue<MixedPrecision>& setting : kMixedPrecisionNames) {
      if (!setting.available) continue;
      const char* precision = setting.name;
      // fp8's Linears multiply in e4m3 (the rest in bf16): its row is named, and held to the peak, as FP8.
      const std::string dtype = setting.value == MixedPrecision::fp8
                                    ? std::string(dtype_name(DType::f8_e4m3))
                                    : dtype_name(PrecisionPolicy::from_settings(setting.value).compute);
      PrecisionRow row{device.str(), "train_step", "mlp step", dtype, shape, 0, 0, "GFLOP/s", 0, "", true, ""};
      if (device.is_cpu()) {
        row.reference = eigen_peak;
        row.reference_name = "eigen f32 gemm (measured)";
      } else if (ref.peaks) {
        row.reference = gemm_peak_gflops(*ref.peaks, dtype);
        row.reference_name = ref.peaks->gpu + " published";
      }
      try {
        const double s = step_seconds(device, precision);
        row.time_us = s * 1e6;
        row.rate = flops / s / 1e9;
        row.note = fmt::format("AdamW, Accelerator mixed_precision={}", precision);
      } catch (const Error& e) {
        // The Accelerator said this precision cannot run here: the row says why instead of a number.
        row.available = false;
        row.note = e.what();
      }
      add(row);
    }
  }

  // The best Eigen rate measured on this device's rows: the CPU's GEMM peak.
  double peak_gemm_reference(Device device) const {
    double best = 0;
    for (const PrecisionRow& r : report_.rows)
      if (r.device == device.str() && r.name == "eigen f32 gemm") best = std::max(best, r.rate);
    return best;
  }

  // Median seconds of one step of the loop a user writes with the Accelerator.
  double step_seconds(Device device, const std::string& precision) {
    AcceleratorOptions options;
    options.mixed_precision = precision;
    options.cpu = device.is_cpu();
    options.gradient_accumulation_steps = 1;
    options.print_settings = false;
    Accelerator accelerator(options);
    if (accelerator.device() != device)
      throw Error(fmt::format("bench precision: the Accelerator picked {}, not {}", accelerator.device().str(),
                              device.str()));
    Generator gen(2);
    const std::vector<int64_t>& w = o_.mlp_widths;
    auto model = std::make_shared<nn::Sequential>();
    for (size_t l = 0; l + 1 < w.size(); ++l) {
      if (l > 0) model->push_back(std::make_shared<nn::ReLU>());
      model->push_back(std::make_shared<nn::Linear>(w[l], w[l + 1], true, gen));
    }
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-3});
    auto [net, opt] = accelerator.prepare(model, optimizer);
    const Tensor x = randn({o_.mlp_batch, w.front()}, gen, DType::f32, device);
    const Tensor y = nograd::to_dtype(nograd::mul(rand({o_.mlp_batch}, gen), static_cast<double>(w.back())), DType::i64);
    const Tensor target = nograd::to_device(y, device);
    return median_seconds(device, o_.warmup, o_.iters, [&] {
      opt->zero_grad();
      Tensor loss;
      {
        auto autocast = accelerator.autocast();  // fp16/bf16 matmuls, f32 loss; nothing with no
        loss = nn::cross_entropy(net->forward(x), target);
      }
      accelerator.backward(loss);
      opt->step();
    });
  }

  const PrecisionOptions& o_;
  PrecisionReport& report_;
  const std::function<void(const PrecisionRow&)>& on_row_;
};

}  // namespace

double mlp_step_flops(const std::vector<int64_t>& widths, int64_t batch) {
  double flops = 0;
  const double b = static_cast<double>(batch);
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const double in = static_cast<double>(widths[l]), out = static_cast<double>(widths[l + 1]);
    flops += 2.0 * b * in * out * (l > 0 ? 3.0 : 2.0);
  }
  return flops;
}

PrecisionReport run_precision_bench(const PrecisionOptions& o, const std::function<void(const PrecisionRow&)>& on_row) {
  if (o.devices.empty()) throw Error("bench precision: no devices given; expected cpu and/or cuda:N");
  if (o.warmup < 0 || o.iters < 1)
    throw Error(fmt::format("bench precision: --warmup {} --iters {}; expected 0 or more and 1 or more", o.warmup,
                            o.iters));
  for (int64_t n : o.gemm_sizes)
    if (n < 1) throw Error(fmt::format("bench precision: GEMM size {}; expected 1 or more", n));
  if (o.elements < 1) throw Error(fmt::format("bench precision: --elements {}; expected 1 or more", o.elements));
  if (o.mlp_widths.size() < 2 || o.mlp_batch < 1)
    throw Error(fmt::format("bench precision: MLP widths [{}] batch {}; expected two widths or more and a batch of 1 "
                            "or more",
                            fmt::join(o.mlp_widths, ", "), o.mlp_batch));
  PrecisionReport report;
  report.threads = omp_get_max_threads();
  report.warmup = o.warmup;
  report.iters = o.iters;
  Runner runner(o, report, on_row);
  for (Device device : o.devices) runner.run(device);
  return report;
}

}  // namespace accel::bench
