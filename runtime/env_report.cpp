// accel env: gathers versions from the libraries themselves, not from the build machine.
#include "runtime/env_report.h"

#include <Eigen/Core>
#include <fmt/format.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "accel_config.h"
#include "runtime/config_file.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/device.h"
#include "tensor/error.h"
#endif
#if ACCEL_WITH_NCCL
#include "collective/nccl_communicator.h"
#endif

namespace accel {

namespace {

#if ACCEL_WITH_CUDA
// CUDA's runtime and driver versions encode major * 1000 + minor * 10.
std::string cuda_version_text(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, v % 1000 / 10) : "none"; }

// The CUDA lines: versions and every GPU this process sees. Works, and says why, without a GPU.
void report_cuda(std::ostringstream& out) {
  const cuda::CudaVersions v = cuda::versions();
  out << fmt::format("CUDA: runtime {}, driver {}{}\n", cuda_version_text(v.runtime), cuda_version_text(v.driver),
                     v.driver == 0 ? " (no NVIDIA driver found)" : "");
  out << fmt::format("cuBLAS: {}.{}.{}\n", v.cublas / 10000, v.cublas / 100 % 100, v.cublas % 100);
  const int count = cuda::device_count();
  if (count == 0) {
    out << fmt::format("GPUs: none visible ({})\n", cuda::unavailable_reason());
    return;
  }
  out << fmt::format("GPUs: {}\n", count);
  for (int i = 0; i < count; ++i) {
    try {
      const cuda::DeviceProperties p = cuda::device_properties(i);
      out << fmt::format("  cuda:{}: {}, {:.1f} GiB, compute capability {}.{}, {} SMs\n", i, p.name,
                         static_cast<double>(p.total_memory) / (1024.0 * 1024.0 * 1024.0), p.major, p.minor,
                         p.multiprocessors);
    } catch (const Error& e) {
      out << fmt::format("  cuda:{}: {}\n", i, e.what());
    }
  }
}
#endif

#if ACCEL_WITH_NCCL
// The NCCL line: the version of the library that was loaded.
void report_nccl(std::ostringstream& out) { out << fmt::format("NCCL: {}\n", nccl_version_string()); }
#endif

}  // namespace

std::string env_report() {
  std::ostringstream out;
  out << fmt::format("accel version: {}\n", ACCEL_VERSION);
  out << fmt::format("build options: cuda={} mpi={} nccl={}\n", ACCEL_WITH_CUDA ? "yes" : "no",
                     ACCEL_WITH_MPI ? "yes" : "no", ACCEL_WITH_NCCL ? "yes" : "no");
#if defined(__clang__)
  out << fmt::format("compiler: clang {}\n", __clang_version__);
#elif defined(__GNUC__)
  out << fmt::format("compiler: GCC {}.{}.{}\n", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  out << fmt::format("Eigen: {}.{}.{} (SIMD: {})\n", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                     Eigen::SimdInstructionSetsInUse());
  out << fmt::format("OpenMP: {} threads (OMP_NUM_THREADS={})\n", omp_get_max_threads(),
                     std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
#if ACCEL_WITH_CUDA
  report_cuda(out);
#endif
#if ACCEL_WITH_NCCL
  report_nccl(out);
#endif
  const std::string path = default_config_path();
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    out << fmt::format("config file: {}\n", path);
    std::istringstream lines(text.str());
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line[0] != '#') out << "  " << line << "\n";
  } else {
    out << fmt::format("config file: none (would be {}; run `accel config`)\n", path);
  }
  return out.str();
}

}  // namespace accel
