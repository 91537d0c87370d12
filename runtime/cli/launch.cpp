// Building and running the mpirun command line.
#include "runtime/cli/launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "kernels/error.h"
#include "runtime/child_process.h"
#include "runtime/cli/rendezvous.h"
#include "runtime/checkpoint/preemption.h"
#include "runtime/cli/trace_command.h"
#include "runtime/process_state.h"

namespace accel {

std::vector<std::pair<std::string, std::string>> settings_environment(const ConfigFile& c) {
  std::vector<std::pair<std::string, std::string>> out{
      {"ACCEL_MIXED_PRECISION", name_of(c.mixed_precision)},
      {"ACCEL_GRADIENT_ACCUMULATION_STEPS", std::to_string(c.gradient_accumulation_steps)},
      {"ACCEL_USE_CPU", c.use_cpu ? "true" : "false"},
      {"ACCEL_BACKEND", name_of(c.backend)}};
  // Only when asked for, so a plain launch's line stays as it was.
  if (c.zero_stage != 0) out.emplace_back("ACCEL_ZERO_STAGE", std::to_string(c.zero_stage));
  if (!c.fsdp_sharding_strategy.empty()) out.emplace_back("ACCEL_FSDP_SHARDING_STRATEGY", c.fsdp_sharding_strategy);
  if (c.fsdp_hybrid_shard_size != 0)
    out.emplace_back("ACCEL_FSDP_HYBRID_SHARD_SIZE", std::to_string(c.fsdp_hybrid_shard_size));
  if (!c.fsdp_transformer_layer_cls_to_wrap.empty())
    out.emplace_back("ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", fmt::format("{}", fmt::join(c.fsdp_transformer_layer_cls_to_wrap, ",")));
  if (c.fsdp_min_num_params != 0) out.emplace_back("ACCEL_FSDP_MIN_NUM_PARAMS", std::to_string(c.fsdp_min_num_params));
  if (!c.fsdp_reshard_after_forward) out.emplace_back("ACCEL_FSDP_RESHARD_AFTER_FORWARD", "false");
  if (c.tp_size != 1) out.emplace_back("ACCEL_TP_SIZE", std::to_string(c.tp_size));
  if (!c.log_with.empty()) out.emplace_back("ACCEL_LOG_WITH", fmt::format("{}", fmt::join(c.log_with, ",")));
  if (c.debug) out.emplace_back("ACCEL_DEBUG", "1");
  if (c.timeout != kDefaultTimeoutSeconds) out.emplace_back("ACCEL_TIMEOUT", std::to_string(c.timeout));
  if (c.sanity_check) out.emplace_back("ACCEL_CHECK", "1");
  // fp8's recipe, where it differs from Transformer Engine's defaults.
  const fp8::RecipeOptions te;
  if (c.mixed_precision == MixedPrecision::fp8) {
    if (c.fp8_format != te.format) out.emplace_back("ACCEL_FP8_FORMAT", name_in(fp8::kFormatNames, c.fp8_format));
    if (c.fp8_margin != te.margin) out.emplace_back("ACCEL_FP8_MARGIN", std::to_string(c.fp8_margin));
    if (c.fp8_amax_history_len != te.amax_history_len)
      out.emplace_back("ACCEL_FP8_AMAX_HISTORY_LEN", std::to_string(c.fp8_amax_history_len));
    if (c.fp8_amax_compute_algo != te.amax_compute_algo)
      out.emplace_back("ACCEL_FP8_AMAX_COMPUTE_ALGO", name_in(fp8::kAmaxAlgorithmNames, c.fp8_amax_compute_algo));
    if (c.fp8_include_first_last) out.emplace_back("ACCEL_FP8_INCLUDE_FIRST_LAST", "1");
  }
  return out;
}

MachineSource machine_source(const ConfigFile& c) {
  validate_config(c, "accel launch");
  const bool machine_flags = !c.main_process_ip.empty() || c.machine_rank > 0;
  // The machine flags that were given, as the user typed them, for the messages below.
  std::string given;
  if (c.machine_rank > 0) given = fmt::format("--machine_rank {}", c.machine_rank);
  if (!c.main_process_ip.empty())
    given += fmt::format("{}--main_process_ip {}", given.empty() ? "" : " ", c.main_process_ip);
  if (!c.hostfile.empty() && machine_flags)
    throw Error(fmt::format("accel launch: --hostfile {} and the machine flags ({}) are two ways to name the machines; "
                            "give one",
                            c.hostfile, given));
  if (c.environment == "slurm") {
    if (machine_flags)
      throw Error(fmt::format("accel launch: inside SLURM mpirun takes the machines from the allocation; drop the "
                              "machine flags ({})",
                              given));
    return MachineSource::slurm;
  }
  if (!c.hostfile.empty()) return MachineSource::hostfile;
  if (c.num_machines == 1) return MachineSource::local;
  if (c.main_process_ip.empty())
    throw Error(fmt::format("accel launch: {} machines need either --hostfile FILE (accel launch runs once, on the "
                            "first host) or --main_process_ip IP with --machine_rank R (accel launch runs on every "
                            "machine)",
                            c.num_machines));
  return MachineSource::rendezvous;
}

std::string cpu_threads_per_process(const LaunchRequest& request, const HostFacts& host) {
  if (request.num_cpu_threads_per_process > 0) return std::to_string(request.num_cpu_threads_per_process);
  if (!request.user_omp_num_threads.empty()) return request.user_omp_num_threads;
  const ConfigFile& c = request.config;
  const int per_machine = (c.num_processes + c.num_machines - 1) / c.num_machines;
  const int cpus = host.usable_cpus > 0 ? host.usable_cpus : host.cores;
  return std::to_string(std::max(1, cpus / std::max(1, per_machine)));
}

std::vector<std::string> mpirun_command(const LaunchRequest& request, const HostFacts& host) {
  const ConfigFile& c = request.config;
  const MachineSource source = machine_source(c);
  if (request.program.empty()) throw Error("accel launch: no program given; usage: accel launch [options] PROGRAM [ARGS...]");
  std::string hostfile = c.hostfile;
  if (source == MachineSource::rendezvous) {
    if (request.machines_hostfile.empty())
      throw Error(fmt::format("accel launch: with the machine flags the mpirun line comes from machine 0 after the "
                              "rendezvous; this is machine {}",
                              c.machine_rank));
    hostfile = request.machines_hostfile;
  }
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(c.num_processes)};
  const int per_machine = (c.num_processes + c.num_machines - 1) / c.num_machines;
  if (per_machine > host.cores) argv.push_back("--oversubscribe");
  if (host.is_root) argv.push_back("--allow-run-as-root");
  if (!hostfile.empty()) {
    argv.push_back("--hostfile");
    argv.push_back(hostfile);
  }
  argv.insert(argv.end(), request.mpirun_args.begin(), request.mpirun_args.end());
  for (const auto& [name, value] : settings_environment(c)) {
    argv.push_back("-x");
    argv.push_back(name + "=" + value);
  }
  if (!request.trace_dir.empty()) {
    argv.push_back("-x");
    argv.push_back("ACCEL_TRACE=" + request.trace_dir);
  }
  if (request.export_main_process_port) {
    argv.push_back("-x");
    argv.push_back(fmt::format("ACCEL_MAIN_PROCESS_PORT={}", c.main_process_port));
  }
  argv.push_back("-x");
  argv.push_back("OMP_NUM_THREADS=" + cpu_threads_per_process(request, host));
  argv.push_back(request.self_path.empty() ? "accel" : request.self_path);
  argv.push_back("exec-rank");
  argv.push_back("--");
  argv.push_back(request.program);
  argv.insert(argv.end(), request.program_args.begin(), request.program_args.end());
  return argv;
}

std::vector<std::string> split_arguments(const std::string& text, const std::string& what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote != 0) {
      if (ch == quote) {
        quote = 0;
      } else if (ch == '\\' && quote == '"' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) {
        word += text[++i];
      } else {
        word += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (quote != 0) throw Error(fmt::format("accel launch: {} has an unterminated {} quote: {}", what, quote, text));
  if (in_word) words.push_back(word);
  return words;
}

namespace {

// Writes the gathered machines to a fresh file under $TMPDIR (or /tmp) and returns its path.
std::string write_hostfile(const std::vector<MachineEntry>& machines) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = fmt::format("{}/accel-hostfile-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  const int fd = mkstemp(path.data());
  if (fd < 0) throw Error(fmt::format("accel launch: cannot create the hostfile {}: {}", path, std::strerror(errno)));
  close(fd);
  std::ofstream(path) << hostfile_text(machines);
  return path;
}

int launch_machine_flags(const LaunchRequest& request, const HostFacts& host, bool dry_run, std::ostream& out,
                         std::ostream& log) {
  const ConfigFile& c = request.config;
  const RendezvousSpec spec{c.main_process_ip, c.main_process_port, c.num_machines, c.num_processes,
                            request.rendezvous_timeout_s};
  if (c.machine_rank > 0) {
    log << fmt::format("accel launch: machine {} of {} joining machine 0 at {}:{}\n", c.machine_rank, c.num_machines,
                       c.main_process_ip, c.main_process_port)
        << std::flush;
    const int status = rendezvous_join(spec, c.machine_rank, [&](const MachineEntry& self) {
      log << fmt::format("accel launch: machine {} joined as {} with {} slots; mpirun on machine 0 starts its ranks\n",
                         self.machine_rank, self.address, self.slots)
          << std::flush;
    });
    log << fmt::format("accel launch: machine 0 reports that the job ended with status {}\n", status);
    return status;
  }

  RendezvousHost rendezvous(spec);
  log << fmt::format("accel launch: machine 0 waiting on {}:{} for {} other machine(s) (up to {} s)\n",
                     c.main_process_ip, rendezvous.port(), c.num_machines - 1, spec.timeout_s)
      << std::flush;
  std::string hostfile;
  try {
    const std::vector<MachineEntry> machines = rendezvous.gather();
    for (const MachineEntry& m : machines)
      log << fmt::format("accel launch: machine {} at {} with {} slots\n", m.machine_rank, m.address, m.slots);
    LaunchRequest with_hosts = request;
    with_hosts.machines_hostfile = hostfile = write_hostfile(machines);
    const std::vector<std::string> argv = mpirun_command(with_hosts, host);
    if (dry_run) {
      out << shell_join(argv) << "\n";
      rendezvous.announce_exit(0);
      return 0;
    }
    const int status = run_job(argv, log);
    std::filesystem::remove(hostfile);
    rendezvous.announce_exit(status);
    return status;
  } catch (const Error& e) {
    if (!hostfile.empty() && !dry_run) std::filesystem::remove(hostfile);
    rendezvous.announce_error(e.what());
    throw;
  }
}

}  // namespace

namespace {
// A directory the job's ranks on this machine share for stall reports and the first failure
// (ACCEL_RUN_DIR, which mpirun's local ranks inherit); removed after the job.
class RunDirectory {
 public:
  RunDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "accel-run-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw Error(fmt::format("accel launch: cannot create a run directory like {}: {}", pattern, std::strerror(errno)));
    path_ = pattern;
    setenv("ACCEL_RUN_DIR", path_.c_str(), 1);
  }
  ~RunDirectory() {
    unsetenv("ACCEL_RUN_DIR");
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  // The first failure a rank wrote ("accel: rank R (host, pid P) failed: ..."), or "".
  std::string first_failure() const {
    std::ifstream in(path_ + "/failure.txt");
    std::string line;
    std::getline(in, line);
    return line;
  }

 private:
  std::string path_;
};

// After a job run with --trace: what `accel trace merge DIR DIR/trace.json --svg DIR/step.svg` does. A
// trace that cannot be merged (no rank got far enough to write one) is reported, not fatal: the job's
// own status is what the launch returns.
void merge_launch_trace(const std::string& dir, std::ostream& log) {
  const std::filesystem::path d(dir);
  try {
    merge_trace_dir({dir, (d / "trace.json").string(), (d / "step.svg").string()}, log);
  } catch (const Error& e) {
    log << "accel launch: the timeline was not merged: " << e.what() << "\n";
  }
}
}  // namespace

int run_job(const std::vector<std::string>& mpirun_argv, std::ostream& log) {
  RunDirectory run_dir;
  // mpirun answers a SIGTERM by killing the ranks a second later, too soon for a checkpoint; it passes
  // SIGUSR2 on to every rank instead, whose wrapper turns it back into the SIGTERM the program expects.
  // That SIGUSR2 goes to this machine's wrappers (mpirun's children) straight from here as well, as
  // mpirun's own passing on can lag by seconds or until the job ends; one rank that has it stops the
  // job at the next step, and a second copy from mpirun changes nothing.
  // A SIGINT goes to mpirun as it is: it ends the job. Either way no rank outlives the launcher.
  const int status = run_command(mpirun_argv, {{SIGTERM, SIGUSR2, true}, {SIGINT, SIGINT}});
  if (status == kPreemptedExitStatus)
    log << fmt::format("accel launch: the job stopped on a preemption request after saving its checkpoint "
                       "(status {}); run it again to resume\n",
                       status);
  else if (status != 0)
    log << fmt::format("accel launch: the job failed (mpirun exited with status {})\n", status);
  if (status != 0 && !run_dir.first_failure().empty())
    log << "accel launch: the first failure: " << run_dir.first_failure().substr(std::string("accel: ").size()) << "\n";
  return status;
}

int launch(const LaunchRequest& request, const HostFacts& host, bool dry_run, std::ostream& out, std::ostream& log) {
  if (!request.quiet)
    for (const std::string& note : request.notes) log << note << "\n" << std::flush;
  if (machine_source(request.config) == MachineSource::rendezvous)
    return launch_machine_flags(request, host, dry_run, out, log);
  const std::vector<std::string> argv = mpirun_command(request, host);
  if (dry_run) {
    out << shell_join(argv) << "\n";
    return 0;
  }
  const int status = run_job(argv, log);
  if (!request.trace_dir.empty()) merge_launch_trace(request.trace_dir, log);
  return status;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      line += arg;
    } else {
      line += '\'';
      for (char ch : arg) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      line += '\'';
    }
  }
  return line;
}

int exec_rank(const std::vector<std::string>& argv) {
  // A SIGTERM sent to this rank, or the SIGUSR2 that mpirun passes on from `accel launch`, reaches the
  // program as a SIGTERM (Accelerator::should_stop). SIGUSR2 comes twice (from the launcher and, later,
  // through mpirun): one that comes once the program has ended is ignored, not a kill of this wrapper.
  std::signal(SIGUSR2, SIG_IGN);
  const int status = run_command(argv, {{SIGTERM, SIGTERM}, {SIGUSR2, SIGTERM}});
  if (status != 0) {
    const ProcessState state = ProcessState::from_environment();
    const std::string why = status == kPreemptedExitStatus ? " (stopped on a preemption request, after saving)"
                            : status == 128 + SIGUSR2      ? " (signal 12: a SIGTERM to accel launch, which mpirun passes on)"
                            : status > 128                 ? fmt::format(" (signal {})", status - 128)
                                                           : "";
    std::cerr << fmt::format("accel launch: rank {} on {} exited with status {}{}\n", state.rank, host_name(), status, why);
  }
  return status;
}

}  // namespace accel
