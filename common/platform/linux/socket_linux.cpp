// Socket set-up on Linux: SOCK_* flags at creation, MSG_NOSIGNAL per send,
// TCP_KEEPIDLE and TCP_USER_TIMEOUT.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::platform {

Result<Fd> OpenSocket(int family, int type, int protocol, Blocking blocking) {
  int flags = SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0);
  Fd fd(socket(family, type | flags, protocol));
  if (!fd.valid()) return SysError("socket", errno);
  return fd;
}

Result<PeerCredentials> PeerCredentialsOf(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return SysError("getsockopt", errno, "SO_PEERCRED");
  }
  return PeerCredentials{static_cast<uint32_t>(cred.uid), static_cast<uint32_t>(cred.pid)};
}

Fd Accept(int listen_fd, Blocking blocking) {
  int flags = SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0);
  return Fd(accept4(listen_fd, nullptr, nullptr, flags));
}

Status OpenSocketPair(int type, Fd* first, Fd* second) {
  int sv[2] = {-1, -1};
  if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0) return SysError("socketpair", errno);
  *first = Fd(sv[0]);
  *second = Fd(sv[1]);
  return Status::Ok();
}

Result<Fd> AnonymousSharedMemory(const char* what, size_t bytes) {
  Fd fd(memfd_create(what, MFD_CLOEXEC));
  if (!fd.valid()) return SysError("memfd_create", errno, what);
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return SysError("ftruncate", errno, what);
  }
  return fd;
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
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPIDLE,
                                     static_cast<int>(l.keepalive_idle.count()), "TCP_KEEPIDLE"));
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPINTVL,
                                     static_cast<int>(l.keepalive_interval.count()),
                                     "TCP_KEEPINTVL"));
  MCDMA_RETURN_IF_ERROR(
      SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPCNT, l.keepalive_count, "TCP_KEEPCNT"));
  return SetSocketInt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
                      static_cast<int>(l.unacked_timeout.count()), "TCP_USER_TIMEOUT");
}

}  // namespace mcdma::platform
