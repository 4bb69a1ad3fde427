// Socket set-up on Linux: SOCK_* flags at creation, MSG_NOSIGNAL per send,
// TCP_KEEPIDLE and TCP_USER_TIMEOUT.
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

}  // namespace

Result<Fd> OpenSocket(int family, int type, int protocol, Blocking blocking) {
  int flags = SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0);
  Fd fd(socket(family, type | flags, protocol));
  if (!fd.valid()) return SysError("socket", errno);
  return fd;
}

Fd AcceptNonBlocking(int listen_fd) {
  return Fd(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
}

ssize_t SendNoSignal(int fd, const void* data, size_t size, int flags) {
  return send(fd, data, size, flags | MSG_NOSIGNAL);
}

ssize_t SendMsgNoSignal(int fd, const msghdr* msg, int flags) {
  return sendmsg(fd, msg, flags | MSG_NOSIGNAL);
}

ssize_t SendToNoSignal(int fd, const void* data, size_t size, const sockaddr* to,
                       socklen_t to_len) {
  return sendto(fd, data, size, MSG_NOSIGNAL, to, to_len);
}

Status SetTcpLiveness(int fd, const TcpLiveness& l) {
  MCDMA_RETURN_IF_ERROR(SetInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPIDLE,
                               static_cast<int>(l.keepalive_idle.count()), "TCP_KEEPIDLE"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPINTVL,
                               static_cast<int>(l.keepalive_interval.count()), "TCP_KEEPINTVL"));
  MCDMA_RETURN_IF_ERROR(SetInt(fd, IPPROTO_TCP, TCP_KEEPCNT, l.keepalive_count, "TCP_KEEPCNT"));
  return SetInt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, static_cast<int>(l.unacked_timeout.count()),
                "TCP_USER_TIMEOUT");
}

}  // namespace mcdma::platform
