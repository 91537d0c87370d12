// accel launch: turns the resolved settings into an Open MPI mpirun command line and runs it.
// mpirun stays the engine that knows hosts, SLURM and networks; accel only writes its arguments.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/config_file.h"

namespace accel {

struct LaunchRequest {
  ConfigFile config;               // config file values overridden by the command's flags
  std::string program;
  std::vector<std::string> program_args;
  std::string self_path;           // this accel executable, which wraps each rank to report its exit
  // Extra mpirun options (--mpirun_args or $ACCEL_MPIRUN_ARGS), placed before the program, e.g.
  // "--mca btl tcp,self --mca btl_tcp_if_include 10.0.0.0/24".
  std::vector<std::string> mpirun_args;
  // With the machine flags: the hostfile machine 0 wrote from the rendezvous.
  std::string machines_hostfile;
  double rendezvous_timeout_s = 300;
  // OpenMP threads per rank: --num_cpu_threads_per_process (0: not given), and the OMP_NUM_THREADS
  // of `accel launch`'s own environment ("": unset). See cpu_threads_per_process.
  int num_cpu_threads_per_process = 0;
  std::string user_omp_num_threads;
  // --main_process_port was given (0 included, then config.main_process_port is the port picked):
  // the ranks get it as ACCEL_MAIN_PROCESS_PORT.
  bool export_main_process_port = false;
  // accel launch's own notes (--multi_gpu, a port picked, an Accelerate config's ignored keys),
  // printed before the job starts unless quiet (-q/--quiet).
  std::vector<std::string> notes;
  bool quiet = false;
  // --trace DIR (absolute): every rank records its timeline there (ACCEL_TRACE), and after the job
  // the launcher merges them into DIR/trace.json, draws the last step in DIR/step.svg and prints the
  // straggler summary.
  std::string trace_dir;
};

// How the launch finds its machines.
enum class MachineSource {
  local,       // one machine
  hostfile,    // --hostfile FILE: mpirun reaches the hosts itself (ssh)
  slurm,       // inside a SLURM allocation: mpirun asks SLURM
  rendezvous,  // --num_machines M --machine_rank R --main_process_ip IP: `accel launch` runs on every machine
};
// Which one the settings ask for; contradicting settings (a hostfile and the machine flags, machine
// flags without --main_process_ip, ...) throw accel::Error naming the values.
MachineSource machine_source(const ConfigFile& config);

struct HostFacts {
  int cores = 1;  // logical CPUs online (std::thread::hardware_concurrency): mpirun's slots
  bool is_root = false;
  // CPUs this process may run on (sched_getaffinity: a taskset, a cgroup cpuset, a SLURM allocation
  // can hold fewer than are online); 0: as many as cores. The ranks inherit the same mask.
  int usable_cpus = 0;
};

// OMP_NUM_THREADS for every rank, as Accelerate sets it: --num_cpu_threads_per_process when given,
// else the user's own OMP_NUM_THREADS (carried to every machine), else max(1, usable CPUs / ranks
// per machine), so the ranks of one machine do not oversubscribe its cores with OpenMP threads.
std::string cpu_threads_per_process(const LaunchRequest& request, const HostFacts& host);

// The full mpirun argv: -np, --oversubscribe when there are more ranks per machine than cores,
// --allow-run-as-root when root, the hostfile, the ACCEL_* settings and OMP_NUM_THREADS exported with
// -x, and each rank wrapped as `accel exec-rank -- PROGRAM ARGS`.
std::vector<std::string> mpirun_command(const LaunchRequest& request, const HostFacts& host);
// Splits an option string the way a POSIX shell splits words: blanks separate, '...' and "..." quote,
// a backslash escapes the next character. An unterminated quote throws accel::Error.
std::vector<std::string> split_arguments(const std::string& text, const std::string& what);
// The ACCEL_* variables that carry the settings to every rank.
std::vector<std::pair<std::string, std::string>> settings_environment(const ConfigFile& config);
// A shell-quoted line of argv, for --dry-run.
std::string shell_join(const std::vector<std::string>& argv);

// The whole of `accel launch` once the request is built. With the machine flags, machine 0 gathers
// the others, writes their hostfile and runs mpirun; every other machine waits for the job's status.
// --dry-run prints the mpirun line to out instead (machine 0 after the rendezvous, keeping its
// hostfile). Progress and failures go to log. Returns the job's exit status.
int launch(const LaunchRequest& request, const HostFacts& host, bool dry_run, std::ostream& out, std::ostream& log);

// Runs mpirun and reports how the job ended; a SIGTERM to `accel launch` reaches every rank as a
// preemption request, a SIGINT ends the job. Returns mpirun's status.
int run_job(const std::vector<std::string>& mpirun_argv, std::ostream& log);
// What `accel exec-rank` does inside each rank: runs the program, and when it fails prints
// "accel launch: rank R on HOST exited with status S" so the failing rank is named.
int exec_rank(const std::vector<std::string>& argv);

}  // namespace accel
