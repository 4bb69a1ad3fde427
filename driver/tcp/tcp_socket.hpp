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
#include <utility>

#include "mcdma/status.hpp"

namespace mcdma::driver::tcp {

using Deadline = std::chrono::steady_clock::time_point;

// An owned file descriptor (move-only); closes on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

// A non-blocking listening socket bound to address:port (port 0 = any).
Result<Fd> Listen(const std::string& address, uint16_t port);
// The port a socket is bound to.
Result<uint16_t> BoundPort(int fd);

// Dials address:port (numeric or a name) and returns a connected,
// non-blocking socket with the data-connection options set. kTimeout when
// the deadline passes, kLinkDown when the peer refuses or is unreachable.
Result<Fd> Dial(const std::string& address, uint16_t port, Deadline deadline);

// TCP_NODELAY, keepalive probing of idle connections (dead after ~25 s),
// TCP_USER_TIMEOUT (unacknowledged data fails the socket after 30 s).
Status SetDataSocketOptions(int fd);

// Blocking-with-deadline transfers on a non-blocking socket (handshake only).
// kTimeout at the deadline; kLinkDown on EOF, reset or another error.
Status WriteAll(int fd, std::span<const std::byte> bytes, Deadline deadline);
Status ReadExact(int fd, std::span<std::byte> bytes, Deadline deadline);

}  // namespace mcdma::driver::tcp
