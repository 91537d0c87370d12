// The machine-flag rendezvous on localhost: machines join machine 0 from threads, learn the job's
// status, and every way it can go wrong ends with a message naming the values on every side.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "free_port.h"
#include "kernels/error.h"
#include "runtime/cli/rendezvous.h"

using namespace accel;

namespace {

RendezvousSpec spec_for(int port, int machines, int processes, double timeout_s = 20) {
  return RendezvousSpec{"127.0.0.1", port, machines, processes, timeout_s};
}

std::future<int> join_async(const RendezvousSpec& spec, int rank, std::promise<MachineEntry>* joined = nullptr) {
  return std::async(std::launch::async, [spec, rank, joined] {
    return rendezvous_join(spec, rank, [joined](const MachineEntry& self) {
      if (joined != nullptr) joined->set_value(self);
    });
  });
}

std::string error_of(std::future<int>& f) {
  try {
    f.get();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("machines 1 and 2 join machine 0, which writes the hostfile and hands every machine the job's status") {
  RendezvousHost host(spec_for(0, 3, 6));
  REQUIRE(host.port() > 0);
  const RendezvousSpec worker = spec_for(host.port(), 3, 6);
  std::promise<MachineEntry> joined2;
  auto second = join_async(worker, 2, &joined2);
  auto first = join_async(worker, 1);
  const std::vector<MachineEntry> machines = host.gather();
  CHECK(machines == std::vector<MachineEntry>{{0, "127.0.0.1", 2}, {1, "127.0.0.1", 2}, {2, "127.0.0.1", 2}});
  CHECK(hostfile_text(machines) == "127.0.0.1 slots=2\n127.0.0.1 slots=2\n127.0.0.1 slots=2\n");
  CHECK(joined2.get_future().get() == MachineEntry{2, "127.0.0.1", 2});
  host.announce_exit(3);
  CHECK(first.get() == 3);
  CHECK(second.get() == 3);
}

TEST_CASE("a machine started before machine 0 keeps retrying until machine 0 listens") {
  const int port = test::free_port();
  auto worker = join_async(spec_for(port, 2, 2), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // at least two refused attempts
  RendezvousHost host(spec_for(port, 2, 2));
  CHECK(host.gather() == std::vector<MachineEntry>{{0, "127.0.0.1", 1}, {1, "127.0.0.1", 1}});
  host.announce_exit(0);
  CHECK(worker.get() == 0);
}

TEST_CASE("machine 0 times out naming the machines that joined and the ones still missing, and tells the joined") {
  RendezvousHost host(spec_for(0, 3, 3, 0.5));
  std::promise<MachineEntry> joined;
  auto worker = join_async(spec_for(host.port(), 3, 3), 2, &joined);
  const std::string message = fmt::format(
      "accel launch: machine 0 waited 0.5 s on 127.0.0.1:{} for 2 other machine(s), but 1 joined (machine_rank 2); "
      "still missing machine_rank 1",
      host.port());
  CHECK_THROWS_WITH_AS(host.gather(), message.c_str(), Error);
  CHECK(error_of(worker) == message);
}

TEST_CASE("a machine gives up when machine 0 never listens, naming the address and the last error") {
  const int port = test::free_port();
  auto worker = join_async(spec_for(port, 2, 4, 0.3), 1);
  CHECK(error_of(worker) ==
        fmt::format("accel launch: machine 1 could not reach machine 0 at 127.0.0.1:{} within 0.3 s (last error: "
                    "Connection refused); is `accel launch --machine_rank 0` running there, and is the port open?",
                    port));
}

TEST_CASE("machines started with different --num_processes are turned away with both values") {
  RendezvousHost host(spec_for(0, 2, 4));
  auto worker = join_async(spec_for(host.port(), 2, 8), 1);
  const std::string message =
      "accel launch: machine 1 (127.0.0.1) was started with --num_machines 2 --num_processes 8, but machine 0 with "
      "--num_machines 2 --num_processes 4; every machine needs the same values";
  CHECK_THROWS_WITH_AS(host.gather(), message.c_str(), Error);
  CHECK(error_of(worker) == message);
}

TEST_CASE("two machines with the same --machine_rank: both are told, and machine 0 fails") {
  RendezvousHost host(spec_for(0, 3, 3));
  std::promise<MachineEntry> joined;
  auto first = join_async(spec_for(host.port(), 3, 3), 1, &joined);
  std::vector<MachineEntry> machines;
  std::thread gather([&] {
    try {
      machines = host.gather();
    } catch (const Error&) {
    }
  });
  joined.get_future().wait();  // the second one connects only after the first was accepted
  auto second = join_async(spec_for(host.port(), 3, 3), 1);
  gather.join();
  const std::string message =
      "accel launch: machine_rank 1 joined twice, from 127.0.0.1 and from 127.0.0.1; give each machine its own "
      "--machine_rank";
  CHECK(machines.empty());
  CHECK(error_of(first) == message);
  CHECK(error_of(second) == message);
}

TEST_CASE("a machine waiting for the job learns when machine 0 goes away without a status") {
  std::future<int> worker;
  {
    RendezvousHost host(spec_for(0, 2, 2));
    worker = join_async(spec_for(host.port(), 2, 2), 1);
    host.gather();
  }
  CHECK(error_of(worker).find("closed the connection before the job ended") != std::string::npos);
}

TEST_CASE("rendezvous errors: a name instead of an address, an address of another machine, uneven processes") {
  CHECK_THROWS_WITH_AS(RendezvousHost(RendezvousSpec{"machine0", 29500, 2, 2}),
                       "accel launch: --main_process_ip 'machine0' is not an IPv4 or IPv6 address (Name or service not "
                       "known); give machine 0's address as the other machines reach it",
                       Error);
  CHECK_THROWS_WITH_AS(rendezvous_join(RendezvousSpec{"10.0.0.300", 29500, 2, 2}, 1),
                       "accel launch: --main_process_ip '10.0.0.300' is not an IPv4 or IPv6 address (Name or service "
                       "not known); give machine 0's address as the other machines reach it",
                       Error);
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
  CHECK_THROWS_WITH_AS(RendezvousHost(RendezvousSpec{"192.0.2.1", 29500, 2, 2}),
                       "accel launch: machine 0 cannot listen on 192.0.2.1:29500 (Cannot assign requested address); "
                       "--main_process_ip must be an address of this machine and --main_process_port a free port",
                       Error);
  CHECK_THROWS_WITH_AS(RendezvousHost(RendezvousSpec{"127.0.0.1", 0, 2, 5}),
                       "accel launch: --num_processes 5 does not divide evenly over --num_machines 2; every machine "
                       "runs the same number of ranks",
                       Error);
  CHECK_THROWS_WITH_AS(rendezvous_join(RendezvousSpec{"127.0.0.1", 29500, 2, 2}, 2),
                       "accel launch: rendezvous_join: machine_rank 2 is not one of 1..1", Error);
}

TEST_CASE("a stranger on the port makes machine 0 fail with what it said") {
  RendezvousHost host(spec_for(0, 2, 2));
  std::thread stranger([port = host.port()] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char request[] = "GET / HTTP/1.0\n";
      (void)!write(fd, request, sizeof request - 1);
      char reply[256];
      (void)!read(fd, reply, sizeof reply);
    }
    close(fd);
  });
  const std::string message = fmt::format(
      "accel launch: machine 0 got an unexpected message from 127.0.0.1 on 127.0.0.1:{}: 'GET / HTTP/1.0' (is another "
      "program using this port?)",
      host.port());
  CHECK_THROWS_WITH_AS(host.gather(), message.c_str(), Error);
  stranger.join();
}
