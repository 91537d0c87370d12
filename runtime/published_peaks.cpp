// The table of published GPU peaks. Numbers are the datasheets' dense figures; the sparse ones
// (twice as large) are never reached by a dense GEMM, so they would make every fraction look halved.
#include "runtime/published_peaks.h"

namespace accel {

const std::vector<PublishedPeaks>& known_gpus() {
  static const std::vector<PublishedPeaks> gpus = {
      {"H200 SXM", "H200", 67.0, 989.4, 989.4, 1978.9, 4800.0,
       "NVIDIA H200 Tensor Core GPU datasheet (2024): FP32 67 TFLOPS, BF16/FP16 tensor 1,979 TFLOPS with sparsity "
       "(989 dense), FP8 tensor 3,958 TFLOPS with sparsity (1,979 dense), HBM3e 4.8 TB/s"},
      {"H100 PCIe", "H100 PCIe", 51.2, 756.5, 756.5, 1513.0, 2000.0,
       "NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe: FP32 51 TFLOPS, BF16/FP16 tensor 1,513 TFLOPS with "
       "sparsity (756 dense), FP8 tensor 3,026 TFLOPS with sparsity (1,513 dense), HBM2e 2 TB/s"},
      {"H100 SXM", "H100", 66.9, 989.4, 989.4, 1978.9, 3350.0,
       "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM: FP32 67 TFLOPS, BF16/FP16 tensor 1,979 TFLOPS with "
       "sparsity (989 dense), FP8 tensor 3,958 TFLOPS with sparsity (1,979 dense), HBM3 3.35 TB/s"},
      {"A100 SXM 80GB", "A100", 19.5, 312.0, 312.0, 0.0, 2039.0,
       "NVIDIA A100 Tensor Core GPU datasheet (2021), 80GB SXM: FP32 19.5 TFLOPS, BF16/FP16 tensor 312 TFLOPS "
       "(624 with sparsity), HBM2e 2,039 GB/s"},
  };
  return gpus;
}

std::optional<PublishedPeaks> published_peaks(const std::string& device_name) {
  for (const PublishedPeaks& p : known_gpus())
    if (device_name.find(p.match) != std::string::npos) return p;
  return std::nullopt;
}

double gemm_peak_gflops(const PublishedPeaks& peaks, const std::string& dtype) {
  if (dtype == "f32") return peaks.f32_tflops * 1e3;
  if (dtype == "f16") return peaks.f16_tflops * 1e3;
  if (dtype == "bf16") return peaks.bf16_tflops * 1e3;
  if (dtype == "f8_e4m3" || dtype == "f8_e5m2") return peaks.fp8_tflops * 1e3;
  return 0;
}

}  // namespace accel
