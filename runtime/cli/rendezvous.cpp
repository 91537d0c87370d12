// The machine-flag rendezvous over plain POSIX TCP sockets: machine 0 listens, the others connect,
// and one text line per message keeps it readable with tcpdump or nc.
#include "runtime/cli/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "kernels/error.h"

namespace accel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxLine = 4096;

// "IP:PORT", or "[IP]:PORT" for IPv6, as users type them.
std::string endpoint(const std::string& ip, int port) {
  return ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port) : fmt::format("{}:{}", ip, port);
}

int slots_per_machine(const RendezvousSpec& spec) {
  if (spec.num_machines < 2)
    throw Error(fmt::format("accel launch: the machine-flag rendezvous needs --num_machines 2 or more, got {}",
                            spec.num_machines));
  if (spec.num_processes % spec.num_machines != 0)
    throw Error(fmt::format("accel launch: --num_processes {} does not divide evenly over --num_machines {}; every "
                            "machine runs the same number of ranks",
                            spec.num_processes, spec.num_machines));
  return spec.num_processes / spec.num_machines;
}

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
};

// Numeric addresses only: a name lookup could hang on a cluster without DNS, and the address is
// also what the hostfile names.
Address resolve(const std::string& ip, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(ip.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0 || found == nullptr)
    throw Error(fmt::format("accel launch: --main_process_ip '{}' is not an IPv4 or IPv6 address ({}); give machine "
                            "0's address as the other machines reach it",
                            ip, gai_strerror(rc)));
  Address a;
  std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
  a.length = found->ai_addrlen;
  a.family = found->ai_family;
  freeaddrinfo(found);
  return a;
}

std::string numeric_host(const sockaddr* sa, socklen_t length) {
  char host[NI_MAXHOST] = "";
  if (getnameinfo(sa, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

std::string local_address(int fd) {
  sockaddr_storage s{};
  socklen_t length = sizeof s;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&s), &length) != 0) return "?";
  return numeric_host(reinterpret_cast<sockaddr*>(&s), length);
}

std::string peer_address(int fd) {
  sockaddr_storage s{};
  socklen_t length = sizeof s;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&s), &length) != 0) return "?";
  return numeric_host(reinterpret_cast<sockaddr*>(&s), length);
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Waits for events on fd; false on timeout. No deadline waits for ever.
bool wait_for(int fd, short events, std::optional<Clock::time_point> deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, deadline ? remaining_ms(*deadline) : -1);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw Error(fmt::format("accel launch: poll failed: {}", std::strerror(errno)));
  }
}

bool send_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

enum class Read { line, closed, timeout };

// Reads one line a byte at a time: the messages are a few dozen bytes, and nothing after the line
// may be consumed before the next read.
Read read_line(int fd, std::string& line, std::optional<Clock::time_point> deadline) {
  line.clear();
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline)) return Read::timeout;
    char ch = 0;
    const ssize_t n = recv(fd, &ch, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Read::closed;
    if (ch == '\n') return Read::line;
    if (line.size() >= kMaxLine) return Read::closed;
    line += ch;
  }
}

std::optional<int> to_int(const std::string& text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

struct Hello {
  int machine_rank = -1, num_machines = -1, num_processes = -1, slots = -1;
  std::string address;
};

std::optional<Hello> parse_hello(const std::string& line) {
  std::istringstream in(line);
  std::string magic, version, field;
  if (!(in >> magic >> version) || magic != "accel-rendezvous" || version != "1") return std::nullopt;
  std::map<std::string, std::string> fields;
  while (in >> field) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) return std::nullopt;
    fields[field.substr(0, eq)] = field.substr(eq + 1);
  }
  Hello h;
  for (auto [key, target] : {std::pair{"machine_rank", &h.machine_rank}, std::pair{"num_machines", &h.num_machines},
                             std::pair{"num_processes", &h.num_processes}, std::pair{"slots", &h.slots}}) {
    const auto it = fields.find(key);
    if (it == fields.end()) return std::nullopt;
    const auto value = to_int(it->second);
    if (!value) return std::nullopt;
    *target = *value;
  }
  const auto address = fields.find("address");
  if (address == fields.end() || address->second.empty()) return std::nullopt;
  h.address = address->second;
  return h;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

RendezvousHost::RendezvousHost(const RendezvousSpec& spec) : spec_(spec) {
  slots_per_machine(spec_);
  const Address address = resolve(spec_.main_ip, spec_.main_port);
  listen_fd_ = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(fmt::format("accel launch: cannot create a socket: {}", std::strerror(errno)));
  const int on = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0 ||
      listen(listen_fd_, 64) != 0) {
    const std::string reason = std::strerror(errno);
    close(listen_fd_);
    throw Error(fmt::format("accel launch: machine 0 cannot listen on {} ({}); --main_process_ip must be an address "
                            "of this machine and --main_process_port a free port",
                            endpoint(spec_.main_ip, spec_.main_port), reason));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

RendezvousHost::~RendezvousHost() {
  for (int fd : joined_fds_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::vector<MachineEntry> RendezvousHost::gather() {
  const int slots = slots_per_machine(spec_);
  std::vector<std::optional<MachineEntry>> machines(static_cast<size_t>(spec_.num_machines));
  machines[0] = MachineEntry{0, spec_.main_ip, slots};
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(spec_.timeout_s));
  const auto fail = [&](int fd, const std::string& message) {
    if (fd >= 0) {
      send_line(fd, "error " + message);
      close(fd);
    }
    announce_error(message);
    throw Error(message);
  };

  for (int waiting = spec_.num_machines - 1; waiting > 0;) {
    if (!wait_for(listen_fd_, POLLIN, deadline)) {
      std::vector<int> joined, missing;
      for (int r = 1; r < spec_.num_machines; ++r) (machines[r] ? joined : missing).push_back(r);
      fail(-1, fmt::format("accel launch: machine 0 waited {} s on {} for {} other machine(s), but {} joined{}; still "
                           "missing machine_rank {}",
                           spec_.timeout_s, endpoint(spec_.main_ip, port_), spec_.num_machines - 1, joined.size(),
                           joined.empty() ? "" : " (machine_rank " + rank_list(joined) + ")", rank_list(missing)));
    }
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fail(-1, fmt::format("accel launch: machine 0 cannot accept on {}: {}", endpoint(spec_.main_ip, port_),
                           std::strerror(errno)));
    }
    const std::string peer = peer_address(fd);
    std::string line;
    const Read read = read_line(fd, line, deadline);
    if (read != Read::line) {
      fail(fd, fmt::format("accel launch: machine 0 got a connection from {} that {} before saying which machine it is",
                           peer, read == Read::timeout ? "stayed silent until the timeout" : "closed"));
    }
    const std::optional<Hello> hello = parse_hello(line);
    if (!hello)
      fail(fd, fmt::format("accel launch: machine 0 got an unexpected message from {} on {}: '{}' (is another "
                           "program using this port?)",
                           peer, endpoint(spec_.main_ip, port_), line));
    if (hello->num_machines != spec_.num_machines || hello->num_processes != spec_.num_processes)
      fail(fd, fmt::format("accel launch: machine {} ({}) was started with --num_machines {} --num_processes {}, but "
                           "machine 0 with --num_machines {} --num_processes {}; every machine needs the same values",
                           hello->machine_rank, hello->address, hello->num_machines, hello->num_processes,
                           spec_.num_machines, spec_.num_processes));
    if (hello->machine_rank < 1 || hello->machine_rank >= spec_.num_machines)
      fail(fd, fmt::format("accel launch: {} joined as machine_rank {}, but with --num_machines {} the other machines "
                           "are machine_rank 1..{} (machine 0 is the one listening)",
                           hello->address, hello->machine_rank, spec_.num_machines, spec_.num_machines - 1));
    auto& slot = machines[static_cast<size_t>(hello->machine_rank)];
    if (slot)
      fail(fd, fmt::format("accel launch: machine_rank {} joined twice, from {} and from {}; give each machine its "
                           "own --machine_rank",
                           hello->machine_rank, slot->address, hello->address));
    slot = MachineEntry{hello->machine_rank, hello->address, hello->slots};
    joined_fds_.push_back(fd);
    send_line(fd, "joined");
    --waiting;
  }
  std::vector<MachineEntry> out;
  for (const auto& m : machines) out.push_back(*m);
  return out;
}

void RendezvousHost::announce(const std::string& line) {
  for (int fd : joined_fds_) send_line(fd, line);
}

void RendezvousHost::announce_exit(int status) { announce(fmt::format("exit {}", status)); }

void RendezvousHost::announce_error(const std::string& message) {
  std::string one_line = message;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  announce("error " + one_line);
}

int rendezvous_join(const RendezvousSpec& spec, int machine_rank,
                    const std::function<void(const MachineEntry&)>& on_joined) {
  const int slots = slots_per_machine(spec);
  if (machine_rank < 1 || machine_rank >= spec.num_machines)
    throw Error(fmt::format("accel launch: rendezvous_join: machine_rank {} is not one of 1..{}", machine_rank,
                            spec.num_machines - 1));
  const Address address = resolve(spec.main_ip, spec.main_port);
  const std::string main = endpoint(spec.main_ip, spec.main_port);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(spec.timeout_s));

  // Machine 0 may start later than this one: retry until the deadline.
  int fd = -1;
  std::string last_error = "timed out";
  for (;;) {
    fd = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw Error(fmt::format("accel launch: cannot create a socket: {}", std::strerror(errno)));
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    if (rc != 0 && errno == EINPROGRESS) {
      const auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      if (wait_for(fd, POLLOUT, attempt)) {
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        rc = error == 0 ? 0 : -1;
        errno = error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    if (Clock::now() >= deadline)
      throw Error(fmt::format("accel launch: machine {} could not reach machine 0 at {} within {} s (last error: {}); "
                              "is `accel launch --machine_rank 0` running there, and is the port open?",
                              machine_rank, main, spec.timeout_s, last_error));
    std::this_thread::sleep_until(std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};

  const MachineEntry self{machine_rank, local_address(fd), slots};
  if (!send_line(fd, fmt::format("accel-rendezvous 1 machine_rank={} num_machines={} num_processes={} slots={} "
                                 "address={}",
                                 machine_rank, spec.num_machines, spec.num_processes, slots, self.address)))
    throw Error(fmt::format("accel launch: machine {} lost the connection to machine 0 at {}: {}", machine_rank, main,
                            std::strerror(errno)));

  const auto closed = [&](const char* when) {
    return Error(fmt::format("accel launch: machine 0 at {} closed the connection {} (its accel launch ended or was "
                             "killed)",
                             main, when));
  };
  std::string line;
  switch (read_line(fd, line, deadline)) {
    case Read::timeout:
      throw Error(fmt::format("accel launch: machine 0 at {} did not answer machine {} within {} s", main,
                              machine_rank, spec.timeout_s));
    case Read::closed: throw closed("before accepting this machine");
    case Read::line: break;
  }
  if (line.rfind("error ", 0) == 0) throw Error(line.substr(6));
  if (line != "joined")
    throw Error(fmt::format("accel launch: machine 0 at {} answered '{}' instead of 'joined'", main, line));
  if (on_joined) on_joined(self);

  // The job may run for days: wait without a deadline, with keepalive so a vanished machine 0 is noticed.
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  if (read_line(fd, line, std::nullopt) != Read::line) throw closed("before the job ended");
  if (line.rfind("error ", 0) == 0) throw Error(line.substr(6));
  if (line.rfind("exit ", 0) == 0) {
    if (const auto status = to_int(line.substr(5))) return *status;
  }
  throw Error(fmt::format("accel launch: machine 0 at {} sent '{}' instead of the job's exit status", main, line));
}

std::string hostfile_text(const std::vector<MachineEntry>& machines) {
  std::string text;
  for (const MachineEntry& m : machines) text += fmt::format("{} slots={}\n", m.address, m.slots);
  return text;
}

}  // namespace accel
