// accel env: gathers versions from the libraries themselves, not from the build machine.
#include "runtime/cli/env_report.h"

#include <Eigen/Core>
#include <fmt/format.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "accel_config.h"
#include "runtime/cli/build_info.h"
#include "runtime/config_file.h"
#include "runtime/process_state.h"
#include "tensor/cpu/matmul.h"
#include "tensor/device.h"
#if ACCEL_WITH_MPI
#include <mpi.h>
#endif

extern char** environ;

#if ACCEL_WITH_CUDA
#include "kernels/error.h"
#include "tensor/cuda/device.h"
#endif
#if ACCEL_WITH_NCCL
#include "collective/nccl_communicator.h"
#endif

namespace accel {

namespace {

// How this library was compiled, beyond the features on the build options line.
std::string build_type_line() {
  return fmt::format("build type: {}, native_arch={}, NDEBUG={}\n", ACCEL_BUILD_TYPE,
                     ACCEL_NATIVE_ARCH ? "true" : "false",
#ifdef NDEBUG
                     "defined"
#else
                     "undefined"
#endif
  );
}

// The MPI library this program runs with (asked at run time: MPI_Get_library_version may be called
// before MPI_Init), the headers it was built against, and the mpirun that `accel launch` would run.
std::string mpi_lines() {
#if ACCEL_WITH_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  std::string library = "unknown (MPI_Get_library_version failed)";
  if (MPI_Get_library_version(text, &length) == MPI_SUCCESS) {
    library.assign(text, static_cast<size_t>(std::max(0, length)));
    while (!library.empty() && (library.back() == '\n' || library.back() == ' ' || library.back() == '\0'))
      library.pop_back();
    for (char& ch : library)
      if (ch == '\n') ch = ';';
  }
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  std::string headers = fmt::format("MPI {}.{}", MPI_VERSION, MPI_SUBVERSION);
#if defined(OMPI_MAJOR_VERSION)
  headers = fmt::format("Open MPI {}.{}.{}", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#endif
  std::string mpirun = "not found on PATH";
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/mpirun";
      if (access(candidate.c_str(), X_OK) == 0) {
        mpirun = candidate;
        break;
      }
    }
  }
  return fmt::format("MPI: {} (standard {}.{}; built against {} headers)\nmpirun: {}\n", library, major, minor,
                     headers, mpirun);
#else
  return "MPI: not built in (meson found no MPI; `accel launch` and multi-rank runs need Open MPI)\n";
#endif
}

// Where this process stands in a job, and the ACCEL_* settings its environment carries.
std::string process_lines() {
  std::string out;
  try {
    const ProcessState s = ProcessState::from_environment();
    out = fmt::format("process: rank {} of {}, local rank {} of {}, node {} of {} (launcher: {})\n", s.rank,
                      s.world_size, s.local_rank, s.local_world_size, s.node_rank, s.num_nodes, s.launcher);
  } catch (const std::exception& e) {
    out = fmt::format("process: the launcher's variables are malformed: {}\n", e.what());
  }
  std::vector<std::string> settings;
  for (char** e = environ; e && *e; ++e)
    if (std::string(*e).rfind("ACCEL_", 0) == 0) settings.emplace_back(*e);
  std::sort(settings.begin(), settings.end());
  out += "ACCEL_* environment:";
  if (settings.empty()) out += " none set";
  for (const std::string& s : settings) out += " " + s;
  return out + "\n";
}

// The CPU's model name from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string devices_line() {
  const unsigned cores = std::thread::hardware_concurrency();
  return fmt::format("devices seen: cpu ({}, {} logical cores), {} cuda\n", cpu_model(), cores, cuda_device_count());
}

// Whether the config file parses, since launch and the Accelerator refuse one that does not.
std::string config_status(const std::string& path) {
  try {
    const ConfigFile config = load_config(path);
    if (config.origin.format == "accelerate")
      return fmt::format("  (valid: an Accelerate config; ignored: {})\n", ignored_keys_text(config));
    return "  (valid)\n";
  } catch (const std::exception& e) {
    return fmt::format("  (invalid: {})\n", e.what());
  }
}
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

std::string env_report(const std::string& config_path) {
  std::ostringstream out;
  out << fmt::format("accel version: {}\n", ACCEL_VERSION);
  out << fmt::format("build options: cuda={} mpi={} nccl={} blas={}\n", ACCEL_WITH_CUDA ? "yes" : "no",
                     ACCEL_WITH_MPI ? "yes" : "no", ACCEL_WITH_NCCL ? "yes" : "no", ACCEL_WITH_BLAS ? "yes" : "no");
  out << build_type_line();
#if defined(__clang__)
  out << fmt::format("compiler: clang {}\n", __clang_version__);
#elif defined(__GNUC__)
  out << fmt::format("compiler: GCC {}.{}.{}\n", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  out << fmt::format("Eigen: {}.{}.{} (SIMD: {})\n", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                     Eigen::SimdInstructionSetsInUse());
  out << fmt::format("CPU GEMM: {}\n", cpu::gemm_library());
  out << fmt::format("OpenMP: {} threads (OMP_NUM_THREADS={})\n", omp_get_max_threads(),
                     std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
  out << mpi_lines();
#if ACCEL_WITH_CUDA
  report_cuda(out);
#endif
#if ACCEL_WITH_NCCL
  report_nccl(out);
#endif
  out << devices_line();
  out << process_lines();
  const std::string path = config_path.empty() ? default_config_path() : config_path;
  if (!config_path.empty() && !std::filesystem::exists(path)) {
    out << fmt::format("config file: {} does not exist (--config_file)\n", path);
  } else if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    out << fmt::format("config file: {}\n", path);
    std::istringstream lines(text.str());
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line[0] != '#') out << "  " << line << "\n";
    out << config_status(path);
  } else {
    out << fmt::format("config file: none (would be {}; run `accel config`)\n", path);
  }
  return out.str();
}

}  // namespace accel
