// The SIGTERM (and SIGUSR2) flag behind Accelerator::should_stop; the handler only sets it (async-signal-safe).
#include "runtime/checkpoint/preemption.h"

#include <csignal>
#include <initializer_list>

namespace accel {
namespace {

volatile std::sig_atomic_t g_requested = 0;

// SIGUSR2 too: it is how mpirun passes a SIGTERM of `accel launch` on.
extern "C" void on_sigterm(int) { g_requested = 1; }

}  // namespace

void listen_for_preemption() {
  // Checked on every call, not once: a handler installed after ours (a test framework's, per test)
  // would otherwise turn the request back into a kill.
  for (int signal_number : {SIGTERM, SIGUSR2}) {
    struct sigaction current {};
    sigaction(signal_number, nullptr, &current);
    if (current.sa_handler == on_sigterm) continue;
    struct sigaction action {};
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a read or a collective in flight goes on; the flag waits for the step
    sigaction(signal_number, &action, nullptr);
  }
}

bool preemption_requested() { return g_requested != 0; }

void clear_preemption_request() { g_requested = 0; }

}  // namespace accel
