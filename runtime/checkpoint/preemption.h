// Preemption: a SIGTERM (what SLURM and Kubernetes send before they kill a job) only sets a flag; the
// Accelerator reads it at a step boundary, where every rank agrees on it and saves the same step.
// Nothing is saved from inside the signal handler.
#pragma once

namespace accel {

// The exit status of a program that stopped because of a preemption request after saving its
// checkpoint (sysexits.h's EX_TEMPFAIL: "try again later"). `accel launch` passes it on and says so.
inline constexpr int kPreemptedExitStatus = 75;

// Makes SIGTERM and SIGUSR2 (how mpirun passes on a SIGTERM to `accel launch`) only set the flag:
// the program has promised to read it (Accelerator::should_stop). Before the first call a SIGTERM
// ends the process as it always did.
void listen_for_preemption();
// Whether one of them arrived since listen_for_preemption.
bool preemption_requested();
// For tests: forget a request.
void clear_preemption_request();

}  // namespace accel
