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

namespace accel {

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
