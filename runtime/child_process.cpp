// run_command: fork, exec, wait, with signals forwarded to the child (signals blocked around the fork,
// so that none arrives before the handler knows whom to send it to), and where asked to its children.
#include "runtime/child_process.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>

#include "kernels/error.h"

namespace accel {
namespace {

volatile pid_t g_child = 0;
volatile std::sig_atomic_t g_sent_for[NSIG] = {};
volatile std::sig_atomic_t g_to_grandchildren[NSIG] = {};
// Set by the handler, served by the wait loop: listing the child's children is no work for a handler.
volatile std::sig_atomic_t g_grandchildren_pending[NSIG] = {};

extern "C" void forward_signal(int signal_number) {
  if (g_child > 0) kill(g_child, g_sent_for[signal_number]);
  if (g_to_grandchildren[signal_number]) g_grandchildren_pending[signal_number] = 1;
}

// The children of pid, from /proc/PID/task/PID/children (empty where the kernel lacks it).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<pid_t> out;
  for (pid_t child = 0; in >> child;) out.push_back(child);
  return out;
}

void serve_grandchildren(pid_t child) {
  for (int s = 1; s < NSIG; ++s) {
    if (!g_grandchildren_pending[s]) continue;
    g_grandchildren_pending[s] = 0;
    for (const pid_t grandchild : children_of(child)) kill(grandchild, g_sent_for[s]);
  }
}

// Installs the forwards for its lifetime and puts the previous handlers back after.
class Forwarding {
 public:
  explicit Forwarding(const std::vector<SignalForward>& forwards) : forwards_(forwards), previous_(forwards.size()) {
    for (size_t i = 0; i < forwards_.size(); ++i) {
      const SignalForward& f = forwards_[i];
      if (f.received <= 0 || f.received >= NSIG)
        throw Error(fmt::format("run_command: cannot forward signal {}", f.received));
      g_sent_for[f.received] = f.sent;
      g_to_grandchildren[f.received] = f.to_grandchildren ? 1 : 0;
      g_grandchildren_pending[f.received] = 0;
      struct sigaction action {};
      action.sa_handler = forward_signal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      sigaction(f.received, &action, &previous_[i]);
      sigaddset(&mask_, f.received);
    }
  }
  ~Forwarding() {
    g_child = 0;
    for (size_t i = 0; i < forwards_.size(); ++i) {
      sigaction(forwards_[i].received, &previous_[i], nullptr);
      g_to_grandchildren[forwards_[i].received] = 0;
    }
  }
  const sigset_t& mask() const { return mask_; }
  bool to_grandchildren() const {
    return std::any_of(forwards_.begin(), forwards_.end(), [](const SignalForward& f) { return f.to_grandchildren; });
  }

 private:
  std::vector<SignalForward> forwards_;
  std::vector<struct sigaction> previous_;
  sigset_t mask_ = empty_set();

  static sigset_t empty_set() {
    sigset_t set;
    sigemptyset(&set);
    return set;
  }
};

}  // namespace

int run_command(const std::vector<std::string>& argv, const std::vector<SignalForward>& forwards) {
  if (argv.empty()) throw Error("run_command: empty command");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Forwarding forwarding(forwards);
  sigset_t before;
  sigprocmask(SIG_BLOCK, &forwarding.mask(), &before);
  const pid_t pid = fork();
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);  // a blocked mask would survive the exec
    execvp(args[0], args.data());
    std::cerr << fmt::format("accel: cannot run '{}': {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  if (pid > 0) g_child = pid;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) throw Error(fmt::format("run_command: fork failed: {}", std::strerror(errno)));
  int status = 0;
  // With grandchildren to reach, a wait that wakes every 20 ms: a signal caught between the check and
  // a blocking wait would otherwise wait for the child's end.
  const int flags = forwarding.to_grandchildren() ? WNOHANG : 0;
  for (;;) {
    const pid_t got = waitpid(pid, &status, flags);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) throw Error(fmt::format("run_command: waitpid failed: {}", std::strerror(errno)));
    serve_grandchildren(pid);
    if (got == 0) {
      const timespec pause{0, 20'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace accel
