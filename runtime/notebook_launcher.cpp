// notebook_launcher: the caller's side starts `accel launch` on this program again; the ranks' side
// (recognised by ACCEL_NOTEBOOK_DIR and ACCEL_NOTEBOOK_CALL) runs fn and reports a failure in a file.
#include "runtime/notebook_launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "accel_config.h"
#include "collective/ledger.h"
#include "runtime/child_process.h"
#include "runtime/cli_location.h"
#include "runtime/process_state.h"
#if ACCEL_WITH_MPI
#include "collective/mpi_environment.h"
#endif

namespace accel {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDirVariable = "ACCEL_NOTEBOOK_DIR";
constexpr const char* kCallVariable = "ACCEL_NOTEBOOK_CALL";

std::atomic<int> g_calls{0};  // notebook_launcher calls so far in this process

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// This program's argv as the kernel has it, so the ranks get the caller's arguments unchanged.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string word;
  while (std::getline(in, word, '\0')) args.push_back(word);
  if (args.empty()) throw Error("notebook_launcher: cannot read this program's arguments from /proc/self/cmdline");
  return args;
}

std::string accel_executable() {
  if (auto path = variable("ACCEL_EXECUTABLE")) return *path;
  for (const char* path : {ACCEL_CLI_BUILD_PATH, ACCEL_CLI_INSTALL_PATH})
    if (access(path, X_OK) == 0) return path;
  return "accel";  // run_command searches PATH
}

// In a rank: runs fn and ends the process there, so that the caller's code after the call runs only
// in the caller. A failure is written for the caller to rethrow, and the process ends without
// MPI_Finalize, so that mpirun ends the job instead of the other ranks waiting in a collective.
[[noreturn]] void run_in_rank(const std::function<void()>& fn, const std::string& dir) {
  const int rank = ProcessState::from_environment().rank;
  std::string what;
  try {
    fn();
    std::cout.flush();
    std::exit(0);  // static destructors finalise MPI once every rank is done
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  const nlohmann::json report{{"rank", rank}, {"host", host_name()}, {"pid", getpid()}, {"what", what},
                              {"monotonic_ns", steady_ns()}};
  const fs::path file = fs::path(dir) / fmt::format("rank_{}.json", rank);
  { std::ofstream(file.string() + ".tmp") << report.dump(); }
  fs::rename(file.string() + ".tmp", file);
  std::cerr << fmt::format("accel: rank {} ({}, pid {}) failed: {}\n", rank, host_name(), getpid(), what);
  std::cout.flush();
  std::cerr.flush();
  _exit(1);
}

// The earliest failure the ranks wrote, if any.
std::optional<RankFailure> first_failure(const fs::path& dir) {
  std::optional<nlohmann::json> first;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    const nlohmann::json report = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (report.is_discarded()) continue;
    if (!first || report.value("monotonic_ns", int64_t{0}) < first->value("monotonic_ns", int64_t{0})) first = report;
  }
  if (!first) return std::nullopt;
  const int rank = first->value("rank", -1);
  return RankFailure(rank, fmt::format("notebook_launcher: rank {} ({}, pid {}) failed: {}", rank,
                                       first->value("host", "?"), first->value("pid", 0), first->value("what", "")));
}

// Sets an environment variable for the launch and puts the old value back after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name), old_(variable(name)) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void check_can_launch(int num_processes) {
  if (num_processes < 1)
    throw Error(fmt::format("notebook_launcher: num_processes is {}, expected at least 1", num_processes));
  const ProcessState process = ProcessState::from_environment();
  if (process.world_size > 1)
    throw Error(fmt::format("notebook_launcher: this program already runs as rank {} of {} ({} started it); call "
                            "the function directly, or start the program plainly",
                            process.rank, process.world_size, process.launcher));
#if ACCEL_WITH_MPI
  if (mpi_running())
    throw Error("notebook_launcher: MPI has already started in this process (an Accelerator on several "
                "processes, or MPI_Init); call notebook_launcher before that, since the ranks must be new processes");
#endif
}

std::vector<std::string> launch_command(int num_processes, const NotebookLaunchOptions& options) {
  std::vector<std::string> argv{accel_executable(), "launch", "--num_processes", std::to_string(num_processes),
                                "--mixed_precision", options.mixed_precision};
  if (options.use_cpu) argv.push_back("--cpu");
  argv.insert(argv.end(), options.launch_args.begin(), options.launch_args.end());
  // mpirun passes only the variables it is told to; these tell each rank which call is its.
  argv.insert(argv.end(), {"--mpirun_args", fmt::format("-x {} -x {}", kDirVariable, kCallVariable), "--"});
  std::vector<std::string> program = own_arguments();
  program[0] = fs::read_symlink("/proc/self/exe").string();
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

}  // namespace

void notebook_launcher(const std::function<void()>& fn, int num_processes, const NotebookLaunchOptions& options) {
  const int call = ++g_calls;
  if (auto dir = variable(kDirVariable)) {
    if (variable(kCallVariable).value_or("") == std::to_string(call)) run_in_rank(fn, *dir);
    return;  // an earlier call, which the caller has already run
  }
  check_can_launch(num_processes);
  if (num_processes == 1) return fn();

  std::string pattern = (fs::temp_directory_path() / "accel_notebook_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw Error(fmt::format("notebook_launcher: cannot create a directory like {}", pattern));
  const fs::path dir = pattern;
  int status = 0;
  {
    ScopedVariable dir_variable(kDirVariable, dir.string());
    ScopedVariable call_variable(kCallVariable, std::to_string(call));
    status = run_command(launch_command(num_processes, options), {{SIGINT, SIGINT}, {SIGTERM, SIGTERM}});
  }
  std::optional<RankFailure> failure = first_failure(dir);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  if (failure) throw *failure;
  if (status != 0)
    throw Error(fmt::format("notebook_launcher: the job of {} processes ended with status {} and no rank reported "
                            "an exception (the launcher's lines above say which rank ended it)",
                            num_processes, status));
}

void debug_launcher(const std::function<void()>& fn, int num_processes) {
  NotebookLaunchOptions options;
  options.use_cpu = true;
  notebook_launcher(fn, num_processes, options);
}

}  // namespace accel
