// The rendezvous behind `accel launch --num_machines M --machine_rank R --main_process_ip IP ...`:
// machine 0 collects the other machines over one TCP socket each, then tells them how the job ended.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace accel {

// The protocol, one text line per message:
//   machine R > 0 -> machine 0: "accel-rendezvous 1 machine_rank=R num_machines=M num_processes=N slots=S address=A"
//   machine 0 -> machine R:     "joined" once accepted, later "exit STATUS" or "error MESSAGE".
// The machines R > 0 start nothing themselves: mpirun on machine 0 starts their ranks through its rsh
// agent (ssh by default), so they only wait and then exit with the job's status.

struct RendezvousSpec {
  std::string main_ip;  // machine 0's numeric IPv4 or IPv6 address, as the others reach it
  int main_port = 29500;  // 0 on machine 0 picks a free port (tests)
  int num_machines = 1;
  int num_processes = 1;  // over all machines; each machine runs num_processes / num_machines
  double timeout_s = 300;  // how long machine 0 waits for the others, and they for it
};

struct MachineEntry {
  int machine_rank = 0;
  std::string address;  // where machine 0 reaches it: the local address of its connection to machine 0
  int slots = 1;  // ranks it runs
  bool operator==(const MachineEntry&) const = default;
};

// Machine 0's side. The constructor listens on main_ip:main_port (an accel::Error naming the address
// when it cannot); the destructor closes every connection, so a machine still waiting learns that
// machine 0 went away.
class RendezvousHost {
 public:
  explicit RendezvousHost(const RendezvousSpec& spec);
  ~RendezvousHost();
  RendezvousHost(const RendezvousHost&) = delete;
  RendezvousHost& operator=(const RendezvousHost&) = delete;

  int port() const { return port_; }
  // Waits until machines 1..M-1 have each joined once, and returns every machine in rank order,
  // this one first (at main_ip). A machine whose settings differ from this one's, a rank joining
  // twice or out of range, or the timeout throw accel::Error; the machines that had joined are told
  // the same message.
  std::vector<MachineEntry> gather();
  // Tells every joined machine the job's exit status; their `accel launch` exits with it.
  void announce_exit(int status);
  // Tells every joined machine that the launch failed, and why.
  void announce_error(const std::string& message);

 private:
  void announce(const std::string& line);

  RendezvousSpec spec_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<int> joined_fds_;
};

// Machine R > 0's side: connects to machine 0 (retrying until spec.timeout_s), says where it is and
// how many ranks it runs, calls on_joined once machine 0 has accepted it, and then waits for the job.
// Returns the job's exit status. Throws accel::Error when machine 0 cannot be reached in time, rejects
// it, or closes the connection without a status.
int rendezvous_join(const RendezvousSpec& spec, int machine_rank,
                    const std::function<void(const MachineEntry&)>& on_joined = {});

// The Open MPI hostfile of the gathered machines: one "ADDRESS slots=S" line each, in rank order,
// so mpirun places ranks 0.. on machine 0 first.
std::string hostfile_text(const std::vector<MachineEntry>& machines);

}  // namespace accel
