// The measurements behind `accel bench precision`, per device: GEMM rate per dtype through
// nograd::matmul and the FP8 GEMM, one Linear's forward and backward in f32, bf16 and fp8, elementwise
// and cast bandwidth, the loss scaler's unscale-and-check pass, and one training step of an MLP
// through the Accelerator in f32, fp16 and bf16. Each figure comes with its
// device's reference: measured in the same run on the CPU (raw Eigen f32 GEMM, memcpy), published
// for known GPUs (runtime/published_peaks.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace accel::bench {

struct PrecisionOptions {
  std::vector<Device> devices = {Device::cpu()};
  std::vector<int64_t> gemm_sizes = {256, 512, 1024};  // square M = K = N (GEMMs and fp8_linear rows)
  int64_t elements = int64_t{1} << 23;                 // per tensor in the bandwidth rows
  std::vector<int64_t> mlp_widths = {784, 1024, 1024, 10};
  int64_t mlp_batch = 256;
  int warmup = 2;  // untimed runs before each row
  int iters = 10;  // timed runs per row; the row reports their median
};

// One row of the table.
struct PrecisionRow {
  std::string device;     // "cpu", "cuda:0"
  std::string group;      // "gemm", "fp8_linear", "elementwise", "cast", "unscale", "train_step"
  std::string name;       // "matmul", "fp8 gemm", "linear fwd+bwd", "add", "f32->bf16", "unscale_and_check_",
                          // "mlp step", "eigen f32 gemm"
  std::string dtype;      // the dtype computed in: "f32", "f16", "bf16", "f8_e4m3" (for casts: the source)
  std::string shape;      // "1024x1024x1024", "8388608", "784-1024-1024-10 b256"
  double time_us = 0;     // median time of one run
  double rate = 0;        // in unit
  std::string unit;       // "GFLOP/s" or "GB/s"
  double reference = 0;   // the device's reference in unit; 0 when it has none
  std::string reference_name;  // "eigen f32 gemm (measured)", "memcpy (measured)", "H200 SXM published", ""
  bool available = true;  // false: the row could not run here, note says why
  std::string note;
  double fraction() const { return reference > 0 ? rate / reference : 0; }
};

struct PrecisionDevice {
  std::string device;     // "cpu", "cuda:0"
  std::string name;       // the CPU model or the GPU's name
  std::string reference;  // "measured" (CPU), "published" (known GPU) or "none"
};

struct PrecisionReport {
  int threads = 1;  // OpenMP threads of the CPU rows
  int warmup = 0;
  int iters = 0;
  std::vector<PrecisionDevice> devices;
  std::vector<PrecisionRow> rows;
};

// FLOPs of one training step of an MLP with these widths on a batch: forward x @ W^T, weight grad
// g^T @ x per layer, and input grad g @ W for every layer but the first (2 M K N each).
double mlp_step_flops(const std::vector<int64_t>& widths, int64_t batch);

// Runs every row on every device of options. on_row, if set, sees each row as soon as it is measured.
// Throws accel::Error on bad options.
PrecisionReport run_precision_bench(const PrecisionOptions& options,
                                    const std::function<void(const PrecisionRow&)>& on_row = {});

}  // namespace accel::bench
