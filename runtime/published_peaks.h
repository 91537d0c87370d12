// Published peak rates of known GPUs: the reference `accel bench precision` shows next to what a GPU
// measured, and a trainer's MFU is a fraction of (a CPU's reference is measured instead).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accel {

// Dense (no 2:4 sparsity) peaks from the vendor's datasheet, per GPU.
struct PublishedPeaks {
  std::string gpu;          // "H200 SXM"
  std::string match;        // matched as a substring of the CUDA device name, e.g. "H200"
  double f32_tflops = 0;    // FP32 without tensor cores
  double f16_tflops = 0;    // FP16 tensor core, dense
  double bf16_tflops = 0;   // BF16 tensor core, dense
  double fp8_tflops = 0;    // FP8 tensor core, dense; 0 for GPUs without FP8 (before Ada and Hopper)
  double memory_gbs = 0;    // device memory bandwidth, 1e9 bytes per second
  std::string source;       // where the numbers come from
};

// Every GPU with published peaks, most specific match first.
const std::vector<PublishedPeaks>& known_gpus();

// The peaks of the first known GPU whose `match` is part of device_name (as the CUDA driver names it,
// e.g. "NVIDIA H200"); nullopt for an unknown GPU.
std::optional<PublishedPeaks> published_peaks(const std::string& device_name);

// The GEMM peak of dtype name "f32", "f16", "bf16" or "f8_e4m3" (the FP8 tensor core rate, e5m2 the
// same) in GFLOP/s; 0 for other names.
double gemm_peak_gflops(const PublishedPeaks& peaks, const std::string& dtype);

}  // namespace accel
