// Socket set-up on macOS: no SOCK_* flags (fcntl instead), SO_NOSIGPIPE per
// socket instead of MSG_NOSIGNAL per send, TCP_KEEPALIVE for the idle time
// and TCP_RXT_CONNDROPTIME (seconds) for the unacknowledged-data limit.
// Every socket the transports send on comes from OpenSocket or
// AcceptNonBlocking, so SO_NOSIGPIPE is always set before the first send.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::platform {
namespace {

Status SetInt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return SysError("setsockopt", errno, what);
  }
  return Status::Ok();
}

Status Prepare(int fd, Blocking blocking) {
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return SysError("fcntl", errno, "FD_CLOEXEC");
  if (blocking == Blocking::kNonBlocking) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
      return SysError("fcntl", errno, "O_NONBLOCK");
    }
  }
  return SetInt(fd, SOL_SOCKET, SO_NOSIGPIPE, 1, "SO_NOSIGPIPE");
}

}  // namespace

Result<Fd> OpenSocket(int family, int type, int protocol, Blocking blocking) {
  Fd fd(socket(family, type, protocol));
  if (!fd.valid()) return SysError("socket", errno);
  MCDMA_RETURN_IF_ERROR(Prepare(fd.get(), blocking));
  return fd;
}

Fd AcceptNonBlocking(int listen_fd) {
  Fd fd(accept(listen_fd, nullptr, nullptr));
  if (!fd.valid()) return fd;
  if (!Prepare(fd.get(), Blocking::kNonBlocking).ok()) return Fd();
  return fd;
}

ssize_t SendNoSignal(int fd, const void* data, size_t size, int flags) {
  return send(fd, data, size, flags);
}

ssize_t SendMsgNoSignal(int fd, const msghdr* msg, int flags) { return sendmsg(fd, msg, flags); }

ssize_t SendToNoSignal(int fd, const void* data, size_t size, const sockaddr* to,
                       socklen_t to_len) {
  return sendto(fd, data, size, 0, to, to_len);
}

Status SetTcpLiveness(int fd, const TcpLiveness& l) {
  MCDMA_RETURN_IF_ERROR(SetInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPALIVE,
                               static_cast<int>(l.keepalive_idle.count()), "TCP_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPINTVL,
                               static_cast<int>(l.keepalive_interval.count()), "TCP_KEEPINTVL"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPCNT, l.keepalive_count, "TCP_KEEPCNT"));
  auto seconds = (l.unacked_timeout.count() + 999) / 1000;
  return SetInt(fd, IPPROTO_TCP, TCP_RXT_CONNDROPTIME, static_cast<int>(seconds),
                "TCP_RXT_CONNDROPTIME");
}

}  // namespace mcdma::platform
