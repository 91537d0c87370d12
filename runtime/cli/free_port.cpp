// pick_free_port: bind to port 0, ask getsockname, close.
#include "runtime/cli/free_port.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/error.h"

namespace accel {

int pick_free_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(address.empty() ? "0.0.0.0" : address.c_str(), "0", &hints, &found);
  if (rc != 0)
    throw Error(fmt::format("accel launch: --main_process_port 0: '{}' is not a numeric address ({})", address,
                            gai_strerror(rc)));
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool bound = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0;
  const std::string reason = std::strerror(errno);
  freeaddrinfo(found);
  sockaddr_storage chosen{};
  socklen_t length = sizeof chosen;
  const bool named = bound && getsockname(fd, reinterpret_cast<sockaddr*>(&chosen), &length) == 0;
  if (fd >= 0) close(fd);
  if (!named)
    throw Error(fmt::format("accel launch: --main_process_port 0: cannot bind a port on '{}' ({})",
                            address.empty() ? "0.0.0.0" : address, reason));
  return ntohs(chosen.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&chosen)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&chosen)->sin_port);
}

}  // namespace accel
