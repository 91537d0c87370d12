// `accel launch --main_process_port 0`: the kernel's pick of a TCP port nothing listens on.
#pragma once

#include <string>

namespace accel {

// Binds a TCP socket to port 0 on address (a numeric IPv4 or IPv6 address; "" for every IPv4
// address), reads the port the kernel chose and closes the socket. Another process could take the
// port before accel listens on it, as with any probe; the kernel hands out recently freed ports last.
// Throws accel::Error naming the address when it cannot bind.
int pick_free_port(const std::string& address);

}  // namespace accel
