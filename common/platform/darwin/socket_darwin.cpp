// Socket set-up on macOS: no SOCK_* flags (fcntl instead), SO_NOSIGPIPE per
// socket instead of MSG_NOSIGNAL per send, TCP_KEEPALIVE for the idle time
// and TCP_RXT_CONNDROPTIME (seconds) for the unacknowledged-data limit.
// Every socket the transports send on comes from OpenSocket, Accept or
// OpenSocketPair, so SO_NOSIGPIPE is always set before the first send.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::platform {
namespace {

Status Prepare(int fd, Blocking blocking) {
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return SysError("fcntl", errno, "FD_CLOEXEC");
  if (blocking == Blocking::kNonBlocking) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
      return SysError("fcntl", errno, "O_NONBLOCK");
    }
  }
  return SetSocketInt(fd, SOL_SOCKET, SO_NOSIGPIPE, 1, "SO_NOSIGPIPE");
}

}  // namespace

Result<Fd> OpenSocket(int family, int type, int protocol, Blocking blocking) {
  Fd fd(socket(family, type, protocol));
  if (!fd.valid()) return SysError("socket", errno);
  MCDMA_RETURN_IF_ERROR(Prepare(fd.get(), blocking));
  return fd;
}

Result<PeerCredentials> PeerCredentialsOf(int fd) {
  uid_t uid = 0;
  gid_t gid = 0;
  if (getpeereid(fd, &uid, &gid) != 0) return SysError("getpeereid", errno);
  pid_t pid = 0;
  socklen_t len = sizeof(pid);
  if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &pid, &len) != 0) {
    return SysError("getsockopt", errno, "LOCAL_PEERPID");
  }
  return PeerCredentials{static_cast<uint32_t>(uid), static_cast<uint32_t>(pid)};
}

Fd Accept(int listen_fd, Blocking blocking) {
  Fd fd(accept(listen_fd, nullptr, nullptr));
  if (!fd.valid()) return fd;
  // An accepted socket inherits O_NONBLOCK from the listener on macOS: set
  // the mode asked for either way.
  int fl = fcntl(fd.get(), F_GETFL);
  if (fl < 0 || fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0) return Fd();
  if (!Prepare(fd.get(), blocking).ok()) return Fd();
  return fd;
}

Status OpenSocketPair(int type, Fd* first, Fd* second) {
  int sv[2] = {-1, -1};
  if (socketpair(AF_UNIX, type, 0, sv) != 0) return SysError("socketpair", errno);
  Fd a(sv[0]);
  Fd b(sv[1]);
  MCDMA_RETURN_IF_ERROR(Prepare(a.get(), Blocking::kBlocking));
  MCDMA_RETURN_IF_ERROR(Prepare(b.get(), Blocking::kBlocking));
  *first = std::move(a);
  *second = std::move(b);
  return Status::Ok();
}

Result<Fd> AnonymousSharedMemory(const char* what, size_t bytes) {
  // A name no one else can guess, unlinked before anyone could open it.
  std::string name = "/mcdma-a-" + RandomHex(11);
  Fd fd(shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
  if (!fd.valid()) return SysError("shm_open", errno, what);
  (void)shm_unlink(name.c_str());
  if (fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0) return SysError("fcntl", errno, "FD_CLOEXEC");
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return SysError("ftruncate", errno, what);
  }
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
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPALIVE,
                                     static_cast<int>(l.keepalive_idle.count()), "TCP_KEEPALIVE"));
  MCDMA_RETURN_IF_ERROR(SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPINTVL,
                                     static_cast<int>(l.keepalive_interval.count()),
                                     "TCP_KEEPINTVL"));
  MCDMA_RETURN_IF_ERROR(
      SetSocketInt(fd, IPPROTO_TCP, TCP_KEEPCNT, l.keepalive_count, "TCP_KEEPCNT"));
  auto seconds = (l.unacked_timeout.count() + 999) / 1000;
  return SetSocketInt(fd, IPPROTO_TCP, TCP_RXT_CONNDROPTIME, static_cast<int>(seconds),
                      "TCP_RXT_CONNDROPTIME");
}

}  // namespace mcdma::platform
