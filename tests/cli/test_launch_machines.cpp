// accel launch across machines: which way the settings name the machines, the mpirun line with extra
// options and the rendezvous hostfile, and a dry run of the machine flags on localhost.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "free_port.h"
#include "kernels/error.h"
#include "runtime/cli/launch.h"
#include "runtime/cli/rendezvous.h"

using namespace accel;

namespace {

ConfigFile machines(int num_machines, int num_processes, int machine_rank, const std::string& ip) {
  ConfigFile c;
  c.environment = "hosts";
  c.num_machines = num_machines;
  c.num_processes = num_processes;
  c.machine_rank = machine_rank;
  c.main_process_ip = ip;
  return c;
}

}  // namespace

TEST_CASE("machine_source: one machine, a hostfile, SLURM, or the machine flags") {
  CHECK(machine_source(ConfigFile{}) == MachineSource::local);
  ConfigFile hostfile = machines(2, 4, 0, "");
  hostfile.hostfile = "hosts.txt";
  CHECK(machine_source(hostfile) == MachineSource::hostfile);
  ConfigFile slurm = machines(2, 4, 0, "");
  slurm.environment = "slurm";
  CHECK(machine_source(slurm) == MachineSource::slurm);
  CHECK(machine_source(machines(2, 4, 1, "10.0.0.1")) == MachineSource::rendezvous);
  CHECK(machine_source(machines(1, 4, 0, "10.0.0.1")) == MachineSource::local);
}

TEST_CASE("machine_source: contradicting flags name the values") {
  ConfigFile both = machines(2, 4, 1, "10.0.0.1");
  both.hostfile = "hosts.txt";
  CHECK_THROWS_WITH_AS(machine_source(both),
                       "accel launch: --hostfile hosts.txt and the machine flags (--machine_rank 1 --main_process_ip "
                       "10.0.0.1) are two ways to name the machines; give one",
                       Error);
  CHECK_THROWS_WITH_AS(machine_source(machines(3, 6, 0, "")),
                       "accel launch: 3 machines need either --hostfile FILE (accel launch runs once, on the first "
                       "host) or --main_process_ip IP with --machine_rank R (accel launch runs on every machine)",
                       Error);
  ConfigFile slurm = machines(2, 4, 1, "10.0.0.1");
  slurm.environment = "slurm";
  CHECK_THROWS_WITH_AS(machine_source(slurm),
                       "accel launch: inside SLURM mpirun takes the machines from the allocation; drop the machine "
                       "flags (--machine_rank 1 --main_process_ip 10.0.0.1)",
                       Error);
  ConfigFile rank_only = machines(2, 4, 1, "");
  rank_only.hostfile = "hosts.txt";
  CHECK_THROWS_WITH_AS(machine_source(rank_only),
                       "accel launch: --hostfile hosts.txt and the machine flags (--machine_rank 1) are two ways to "
                       "name the machines; give one",
                       Error);
  CHECK_THROWS_WITH_AS(machine_source(machines(2, 4, 2, "10.0.0.1")),
                       "accel launch: machine_rank 2 must be below num_machines 2", Error);
}

TEST_CASE("mpirun_command puts the user's mpirun options before the settings and uses the rendezvous hostfile") {
  LaunchRequest request;
  request.config = machines(2, 4, 0, "10.0.0.1");
  request.program = "./train";
  request.program_args = {"--steps", "3"};
  request.self_path = "/bin/accel";
  request.mpirun_args = {"--mca", "btl", "tcp,self"};
  CHECK_THROWS_WITH_AS(mpirun_command(request, HostFacts{4, false}),
                       "accel launch: with the machine flags the mpirun line comes from machine 0 after the "
                       "rendezvous; this is machine 0",
                       Error);
  request.machines_hostfile = "/tmp/accel-hostfile-x";
  CHECK(shell_join(mpirun_command(request, HostFacts{1, true})) ==
        "mpirun -np 4 --oversubscribe --allow-run-as-root --hostfile /tmp/accel-hostfile-x --mca btl tcp,self "
        "-x ACCEL_MIXED_PRECISION=no -x ACCEL_GRADIENT_ACCUMULATION_STEPS=1 -x ACCEL_USE_CPU=false "
        "-x ACCEL_BACKEND=auto -x OMP_NUM_THREADS=1 /bin/accel exec-rank -- ./train --steps 3");
}

TEST_CASE("split_arguments splits --mpirun_args like a shell") {
  CHECK(split_arguments("", "x").empty());
  CHECK(split_arguments("  --mca btl tcp,self\t-x  A=1 ", "x") ==
        std::vector<std::string>{"--mca", "btl", "tcp,self", "-x", "A=1"});
  CHECK(split_arguments(R"(--mca plm_rsh_agent 'ip netns exec' -x "B=two words" C=\"q\" '' "a\"b")", "x") ==
        std::vector<std::string>{"--mca", "plm_rsh_agent", "ip netns exec", "-x", "B=two words", "C=\"q\"", "",
                                 "a\"b"});
  CHECK_THROWS_WITH_AS(split_arguments("--mca btl 'tcp", "--mpirun_args"),
                       "accel launch: --mpirun_args has an unterminated ' quote: --mca btl 'tcp", Error);
}

TEST_CASE("launch --dry-run with the machine flags: machine 0 prints the mpirun line after the rendezvous") {
  LaunchRequest main;
  main.config = machines(2, 4, 0, "127.0.0.1");
  main.config.main_process_port = test::free_port();
  main.program = "./train";
  main.self_path = "/bin/accel";
  main.rendezvous_timeout_s = 20;
  LaunchRequest other = main;
  other.config.machine_rank = 1;

  std::ostringstream other_log, out, log, unused;
  auto joined = std::async(std::launch::async,
                           [&] { return launch(other, HostFacts{2, false}, /*dry_run=*/true, unused, other_log); });
  CHECK(launch(main, HostFacts{2, false}, /*dry_run=*/true, out, log) == 0);
  CHECK(joined.get() == 0);

  const std::string line = out.str();
  const std::string before = "mpirun -np 4 --hostfile ";
  REQUIRE(line.rfind(before, 0) == 0);
  const std::string hostfile = line.substr(before.size(), line.find(' ', before.size()) - before.size());
  CHECK(line.substr(before.size() + hostfile.size()) ==
        " -x ACCEL_MIXED_PRECISION=no -x ACCEL_GRADIENT_ACCUMULATION_STEPS=1 -x ACCEL_USE_CPU=false "
        "-x ACCEL_BACKEND=auto -x OMP_NUM_THREADS=1 /bin/accel exec-rank -- ./train\n");
  std::ifstream in(hostfile);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "127.0.0.1 slots=2\n127.0.0.1 slots=2\n");
  std::filesystem::remove(hostfile);
  CHECK(log.str().find("accel launch: machine 1 at 127.0.0.1 with 2 slots\n") != std::string::npos);
  CHECK(other_log.str().find("accel launch: machine 1 joined as 127.0.0.1 with 2 slots") != std::string::npos);
  CHECK(other_log.str().find("the job ended with status 0") != std::string::npos);
}
