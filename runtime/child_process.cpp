// run_command: fork, exec, wait, with signals forwarded to the child (signals blocked around the fork,
// so that none arrives before the handler knows whom to send it to).
#include "runtime/child_process.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <iostream>

#include "kernels/error.h"

namespace accel {
namespace {

volatile pid_t g_child = 0;
volatile std::sig_atomic_t g_sent_for[NSIG] = {};

extern "C" void forward_signal(int signal_number) {
  if (g_child > 0) kill(g_child, g_sent_for[signal_number]);
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
    for (size_t i = 0; i < forwards_.size(); ++i) sigaction(forwards_[i].received, &previous_[i], nullptr);
  }
  const sigset_t& mask() const { return mask_; }

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
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("run_command: waitpid failed: {}", std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace accel
