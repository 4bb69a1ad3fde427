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

// A non-blocking listening socket bound to address:port (port 0 = any)
// and, when `ifname` is given, on Linux and where permitted, to that
// interface (SO_BINDTODEVICE, as DialSource): it then accepts only
// connections that arrive over that interface.
Result<Fd> Listen(const std::string& address, uint16_t port, const std::string& ifname = {});
// The port a socket is bound to.
Result<uint16_t> BoundPort(int fd);

// Where a dial leaves from (a rail): the socket is bound to `address`
// (an IP literal, any port) and, on Linux where permitted, to the
// interface `ifname` (SO_BINDTODEVICE; skipped when empty, or when the
// kernel answers EPERM). Bound so, the dial leaves over that interface
// whatever the routes say, and a peer's rail listener (bound to its own
// interface, see Listen) refuses it at once when it arrives over another
// cable: a rail probe learns that two addresses are not on one cable.
// Empty address: the kernel picks the source, as usual.
struct DialSource {
  std::string address;
  std::string ifname;
};

// Dials address:port (numeric or a name) from `source` and returns a
// connected, non-blocking socket with the data-connection options set.
// kTimeout when the deadline passes, kLinkDown when the peer refuses or is
// unreachable, or the source cannot be bound (its address or interface is
// gone, or of another family than the peer's).
Result<Fd> Dial(const std::string& address, uint16_t port, Deadline deadline,
                const DialSource& source = {});

// Makes close(2) reset the connection (SO_LINGER {1, 0}): unsent bytes are
// discarded and the peer sees RST rather than an orderly end.
Status SetResetOnClose(int fd);

// TCP_NODELAY, keepalive probing of idle connections (dead after ~25 s),
// unacknowledged data fails the socket after 30 s (platform/socket.hpp).
Status SetDataSocketOptions(int fd);

// Blocking-with-deadline transfers on a non-blocking socket (handshake only).
// kTimeout at the deadline; kLinkDown on EOF, reset or another error.
Status WriteAll(int fd, std::span<const std::byte> bytes, Deadline deadline);
Status ReadExact(int fd, std::span<std::byte> bytes, Deadline deadline);

}  // namespace mcdma::driver::tcp
