// Watchdog: polling the ledgers, the roll-call files in the run directory, the report and the end of
// the job; and the handlers that name a failing rank.
#include "runtime/faults/watchdog.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/faults/rank_state.h"
#include "runtime/process_state.h"

namespace accel {
namespace fs = std::filesystem;
namespace {

std::string state_file(const std::string& dir, int rank) { return fmt::format("{}/state_{}.json", dir, rank); }

// Writes a whole file under a temporary name and renames it, so a reader never sees half of it.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  { std::ofstream(tmp) << text; }
  std::error_code ignored;
  fs::rename(tmp, path, ignored);
}

// Creates path with text only if it does not exist yet: true for the one caller that made it.
bool create_exclusively(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return false;
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  close(fd);
  return true;
}

std::optional<RankState> read_state(const std::string& dir, int rank) {
  std::ifstream in(state_file(dir, rank));
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  try {
    return RankState::from_json(j);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

double seconds_since(int64_t ns) { return static_cast<double>(steady_ns() - ns) / 1e9; }

}  // namespace

std::optional<std::string> run_directory() {
  const char* dir = std::getenv("ACCEL_RUN_DIR");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::string(dir);
}

Watchdog::Watchdog(WatchdogOptions options) : options_(std::move(options)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_s));
    if (stopping_) break;
    lock.unlock();
    check_once();
    lock.lock();
  }
}

void Watchdog::answer_roll_call_if_asked() {
  if (!options_.run_dir || answered_) return;
  if (!fs::exists(*options_.run_dir + "/rollcall")) return;
  write_atomically(state_file(*options_.run_dir, options_.rank), capture_rank_state(options_.rank, "running").to_json().dump());
  answered_ = true;
}

bool Watchdog::departed_before(const std::string& comm, uint64_t seq) const {
  if (!options_.run_dir) return false;
  for (int r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    const std::optional<RankState> state = read_state(*options_.run_dir, r);
    if (!state || state->activity != "exiting") continue;
    const CommunicatorState* c = state->find(comm);
    if (c != nullptr && c->last_seq < seq) return true;
  }
  return false;
}

void Watchdog::check_once() {
  answer_roll_call_if_asked();
  for (const auto& ledger : live_ledgers()) {
    LedgerEntry e;
    if (!ledger->oldest_running(e)) continue;
    const double waited = seconds_since(e.entered_ns);
    if (waited > options_.timeout_s)
      return stalled(ledger->name(), waited, e.seq, fmt::format("the timeout is {} s", options_.timeout_s));
    if (waited > options_.departed_grace_s && departed_before(ledger->name(), e.seq))
      return stalled(ledger->name(), waited, e.seq, "a rank it waits for has left the program");
  }
}

void Watchdog::stalled(const std::string& comm, double waited_s, uint64_t seq, const std::string& why) {
  if (options_.run_dir && !create_exclusively(*options_.run_dir + "/rollcall", std::to_string(options_.rank))) {
    answer_roll_call_if_asked();  // another rank reports; this one's state is part of it
    return;
  }
  report_and_end(comm, seq, waited_s, why);
}

void Watchdog::report_and_end(const std::string& comm, uint64_t seq, double waited_s, const std::string& why) {
  const RankState mine = capture_rank_state(options_.rank, "running");
  std::vector<std::optional<RankState>> states(static_cast<size_t>(options_.world_size));
  states[static_cast<size_t>(options_.rank)] = mine;
  if (options_.run_dir) {
    write_atomically(state_file(*options_.run_dir, options_.rank), mine.to_json().dump());
    const int64_t start = steady_ns();
    for (;;) {
      bool all = true;
      for (int r = 0; r < options_.world_size; ++r)
        if (!states[static_cast<size_t>(r)]) all = (states[static_cast<size_t>(r)] = read_state(*options_.run_dir, r)) && all;
      if (all || seconds_since(start) > options_.roll_call_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  LedgerEntry stalled_entry;
  for (const CommunicatorState& c : mine.communicators)
    if (c.name == comm && c.running) stalled_entry = *c.running;
  std::string report = stall_report(options_.rank, comm, stalled_entry, waited_s, states);
  if (!options_.run_dir)
    report += "  (only this rank's view: ACCEL_RUN_DIR is unset; `accel launch` sets it so that every rank reports)\n";
  const std::string last = fmt::format("accel: rank {} ({}, pid {}) ends the job: {} #{} on communicator {} did not "
                                       "finish ({})",
                                       options_.rank, mine.host, mine.pid, stalled_entry.op, seq, comm, why);
  std::cerr << report << last << std::endl;
  if (options_.run_dir) {
    create_exclusively(*options_.run_dir + "/failure.txt", last + "\n");
    write_atomically(*options_.run_dir + "/report.txt", report + last + "\n");
  }
  std::cout.flush();
  // Ending the process without MPI_Finalize makes mpirun end every other rank.
  _exit(kStalledExitStatus);
}

// ---- naming a failing rank ----
namespace {

int g_rank = -1;
std::string g_run_dir;
char g_signal_prefix[512];   // "accel: rank R (host, pid P) failed: signal "
char g_failure_path[4096];   // run_dir/failure.txt, or empty
std::terminate_handler g_previous_terminate = nullptr;

std::string identity() {
  return fmt::format("rank {} ({}, pid {})", g_rank, host_name(), getpid());
}

void record_failure(const std::string& line) {
  std::cerr << line << std::endl;
  if (!g_run_dir.empty()) create_exclusively(g_run_dir + "/failure.txt", line + "\n");
}

// " (its last collective: broadcast #3 at Accelerator::broadcast at train.cpp:40)", or "".
std::string last_collective() {
  const RankState state = capture_rank_state(g_rank, "running");
  std::optional<LedgerEntry> newest;
  for (const CommunicatorState& c : state.communicators)
    for (const std::optional<LedgerEntry>* e : {&c.running, &c.last_finished})
      if (*e && (!newest || (*e)->entered_ns > newest->entered_ns)) newest = **e;
  if (!newest) return "";
  return fmt::format(" (its last collective: {} #{} at {})", newest->op, newest->seq, newest->site);
}

[[noreturn]] void name_and_terminate() {
  std::string what = "an unknown exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "an exception that is not a std::exception";
    }
  } else {
    what = "std::terminate was called without an exception";
  }
  record_failure(fmt::format("accel: {} failed: {}{}", identity(), what, last_collective()));
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

extern "C" void name_fatal_signal(int signal_number) {
  // Async-signal-safe only: write, open, close, then the default action.
  const char* name = signal_number == SIGSEGV ? "SIGSEGV" : signal_number == SIGBUS ? "SIGBUS"
                     : signal_number == SIGFPE ? "SIGFPE" : "SIGILL";
  ssize_t ignored = write(2, g_signal_prefix, std::strlen(g_signal_prefix));
  ignored = write(2, name, std::strlen(name));
  ignored = write(2, "\n", 1);
  if (g_failure_path[0] != '\0') {
    const int fd = open(g_failure_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      ignored = write(fd, g_signal_prefix, std::strlen(g_signal_prefix));
      ignored = write(fd, name, std::strlen(name));
      ignored = write(fd, "\n", 1);
      close(fd);
    }
  }
  (void)ignored;
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

void write_exiting_state() {
  if (g_run_dir.empty()) return;
  write_atomically(state_file(g_run_dir, g_rank), capture_rank_state(g_rank, "exiting").to_json().dump());
}

}  // namespace

void install_failure_naming(int rank, const std::optional<std::string>& run_dir) {
  static bool installed = false;
  g_rank = rank;
  g_run_dir = run_dir.value_or("");
  std::snprintf(g_signal_prefix, sizeof(g_signal_prefix), "accel: %s failed: signal ", identity().c_str());
  std::snprintf(g_failure_path, sizeof(g_failure_path), "%s",
                g_run_dir.empty() ? "" : (g_run_dir + "/failure.txt").c_str());
  if (installed) return;
  installed = true;
  g_previous_terminate = std::set_terminate(name_and_terminate);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction action {};
    action.sa_handler = name_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(s, &action, nullptr);
  }
  std::atexit(write_exiting_state);
}

}  // namespace accel
