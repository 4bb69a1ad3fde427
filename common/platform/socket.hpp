// Socket set-up that differs between Linux and macOS
// (linux/socket_linux.cpp, darwin/socket_darwin.cpp):
//   * close-on-exec and non-blocking at creation (SOCK_* flags on Linux,
//     fcntl on macOS), and no SIGPIPE on a peer that went away
//     (MSG_NOSIGNAL per send on Linux, SO_NOSIGPIPE per socket on macOS);
//   * how a TCP connection notices a dead peer (keepalive probing and
//     the limit on unacknowledged data: TCP_KEEPIDLE/TCP_USER_TIMEOUT on
//     Linux, TCP_KEEPALIVE/TCP_RXT_CONNDROPTIME on macOS).
// Every failure is a SysError naming the call and the option.
//
// Threading: free functions, no shared state.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::platform {

enum class Blocking : uint8_t { kBlocking, kNonBlocking };

// socket(2), close-on-exec, SIGPIPE suppressed; non-blocking if asked.
Result<Fd> OpenSocket(int family, int type, int protocol, Blocking blocking);

// accept(2) on a listening socket: the new socket is close-on-exec and
// SIGPIPE-suppressed, non-blocking if asked. Returns an invalid Fd (and
// leaves errno) when nothing is pending or accept failed.
Fd Accept(int listen_fd, Blocking blocking);

// Who is at the other end of a connected AF_UNIX socket, as the kernel
// saw it at connect time (SO_PEERCRED on Linux; getpeereid and
// LOCAL_PEERPID on macOS). Unforgeable by the peer.
struct PeerCredentials {
  uint32_t uid = 0;
  uint32_t pid = 0;
};
Result<PeerCredentials> PeerCredentialsOf(int fd);

// socketpair(AF_UNIX, type): both ends close-on-exec and SIGPIPE-suppressed.
Status OpenSocketPair(int type, Fd* first, Fd* second);

// Shared memory with no name anyone can open: memfd_create on Linux,
// shm_open + shm_unlink at once on macOS. `bytes` long (zero-filled),
// close-on-exec; hand the fd to a child to share it.
Result<Fd> AnonymousSharedMemory(const char* what, size_t bytes);

// send/sendmsg/sendto that never raise SIGPIPE (EPIPE is returned instead).
ssize_t SendNoSignal(int fd, const void* data, size_t size, int flags);
ssize_t SendMsgNoSignal(int fd, const msghdr* msg, int flags);
ssize_t SendToNoSignal(int fd, const void* data, size_t size, const sockaddr* to, socklen_t to_len);

// setsockopt(fd, level, name, &value): SysError naming `what` (the
// option) on failure.
Status SetSocketInt(int fd, int level, int name, int value, const char* what);

// How a data connection notices a peer that vanished without closing.
struct TcpLiveness {
  std::chrono::seconds keepalive_idle{10};     // first probe after this much silence
  std::chrono::seconds keepalive_interval{5};  // between probes
  int keepalive_count = 3;                     // unanswered probes before the reset
  // Unacknowledged data older than this fails the socket (Linux counts in
  // milliseconds, macOS in seconds: rounded up there).
  std::chrono::milliseconds unacked_timeout{30'000};
};
Status SetTcpLiveness(int fd, const TcpLiveness& liveness);

}  // namespace mcdma::platform
