// The readiness poller every I/O thread waits in: epoll on Linux
// (linux/poller_linux.cpp), kqueue on macOS (darwin/poller_darwin.cpp).
// docs/architecture.md ("The platform seam") says why this and not
// Boost.Asio, with the measured figures.
//
// Level-triggered on both: an fd stays ready until it is drained, so a
// caller that reads only part of what is there is told again. Each fd has
// one tag (any pointer the caller chooses) and an interest of read, write
// or both; Wait reports at most one PollEvent per tag per call (kqueue's
// separate read and write filters are merged).
//
// Threading: one owner thread calls everything (the tcp device's I/O
// thread). Not copyable; movable.
#pragma once

#include <cstdint>
#include <span>

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::platform {

enum Interest : uint32_t { kInterestRead = 1, kInterestWrite = 2 };

struct PollEvent {
  void* tag = nullptr;
  // Data, end of stream, a reset or a pending socket error: a read (or
  // recv) says which. Hang-ups and errors always count as readable.
  bool readable = false;
  bool writable = false;
};

class Poller {
 public:
  // SysError naming epoll_create1 / kqueue when the kernel refuses (EMFILE).
  static Result<Poller> Create();

  Poller() = default;
  Poller(Poller&&) noexcept = default;
  Poller& operator=(Poller&&) noexcept = default;

  // Starts watching fd; `interest` is a mask of Interest bits.
  Status Add(int fd, void* tag, uint32_t interest);
  // Changes what fd is watched for (the tag may change too).
  Status Modify(int fd, void* tag, uint32_t interest);
  // Stops watching fd; call before closing it. Never fails the caller:
  // an fd that was not watched is ignored.
  void Remove(int fd);
  // Waits up to timeout_ms (-1: no limit, 0: just look) and fills `out`.
  // Returns how many entries were filled (0 on timeout or EINTR), or a
  // SysError when the poller itself is broken.
  Result<size_t> Wait(std::span<PollEvent> out, int timeout_ms);

 private:
  explicit Poller(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

}  // namespace mcdma::platform
