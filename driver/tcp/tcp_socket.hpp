// Sockets for the tcp transport: an owning fd, the listening socket, and
// the blocking-with-deadline calls Connect uses for the handshake. Every
// failing system call goes through SysError (call name + errno).
//
// Threading: free functions, no shared state; an Fd belongs to whoever holds it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::driver::tcp {

using Deadline = std::chrono::steady_clock::time_point;

using platform::Fd;

// A non-blocking listening socket bound to address:port (port 0 = any).
Result<Fd> Listen(const std::string& address, uint16_t port);
// The port a socket is bound to.
Result<uint16_t> BoundPort(int fd);

// Dials address:port (numeric or a name) and returns a connected,
// non-blocking socket with the data-connection options set. kTimeout when
// the deadline passes, kLinkDown when the peer refuses or is unreachable.
Result<Fd> Dial(const std::string& address, uint16_t port, Deadline deadline);

// TCP_NODELAY, keepalive probing of idle connections (dead after ~25 s),
// unacknowledged data fails the socket after 30 s (platform/socket.hpp).
Status SetDataSocketOptions(int fd);

// Blocking-with-deadline transfers on a non-blocking socket (handshake only).
// kTimeout at the deadline; kLinkDown on EOF, reset or another error.
Status WriteAll(int fd, std::span<const std::byte> bytes, Deadline deadline);
Status ReadExact(int fd, std::span<std::byte> bytes, Deadline deadline);

}  // namespace mcdma::driver::tcp
