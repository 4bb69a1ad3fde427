// Socket helpers of the tcp transport (see tcp_socket.hpp).
#include "driver/tcp/tcp_socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>

#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::driver::tcp {
namespace {

constexpr auto kNonBlocking = platform::Blocking::kNonBlocking;

// Idle connections are probed so that a vanished peer host is noticed even
// when nothing is being sent: after 10 s idle, every 5 s, 3 misses. Data
// left unacknowledged for 30 s (peer host frozen or gone, cable pulled)
// errors the socket instead of retransmitting for ~15 minutes. The peer's
// I/O thread reads whenever data arrives, so a live peer never leaves its
// window closed this long.
constexpr platform::TcpLiveness kLiveness{.keepalive_idle = std::chrono::seconds(10),
                                          .keepalive_interval = std::chrono::seconds(5),
                                          .keepalive_count = 3,
                                          .unacked_timeout = std::chrono::milliseconds(30'000)};

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> Resolve(const std::string& address, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc =
      getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return Status(Code::kInvalid, "getaddrinfo(" + address + "): " + std::string(gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

int RemainingMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1'000'000));
}

// Waits for `events` on fd until the deadline: Ok, kTimeout or a SysError.
Status WaitFor(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd pfd{.fd = fd, .events = events, .revents = 0};
    int rc = poll(&pfd, 1, RemainingMs(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Status(Code::kTimeout, std::string(what) + ": timed out");
    if (errno != EINTR) return SysError("poll", errno, what);
  }
}

Status LinkError(const char* call, int err, const std::string& what) {
  Status sys = SysError(call, err, what);
  return Status(Code::kLinkDown, sys.message());
}

// Binds `fd` to the interface `ifname` (SO_BINDTODEVICE), on Linux and
// where permitted: without CAP_NET_RAW (kernels before 5.7) the kernel
// answers EPERM and the socket stays unbound (Ok). Elsewhere, and for an
// empty name, nothing to do. The SysError when the kernel refuses otherwise
// (no such interface, ...).
Status BindToInterface(int fd, const std::string& ifname) {
#ifdef __linux__
  if (!ifname.empty() &&
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname.data(),
                 static_cast<socklen_t>(ifname.size())) != 0 &&
      errno != EPERM) {
    return SysError("setsockopt", errno, "SO_BINDTODEVICE " + ifname);
  }
#else
  (void)fd;
  (void)ifname;
#endif
  return Status::Ok();
}

// Binds a socket of `family` that is about to dial to `source` (DialSource).
Status BindSource(int fd, int family, const DialSource& source) {
  if (source.address.empty()) return Status::Ok();
  if (Status bound = BindToInterface(fd, source.ifname); !bound.ok()) {
    return Status(Code::kLinkDown, bound.message());
  }
  Result<AddrInfoPtr> resolved = Resolve(source.address, 0, /*passive=*/false);
  if (!resolved.ok()) return Status(Code::kLinkDown, resolved.status().message());
  for (addrinfo* a = resolved->get(); a != nullptr; a = a->ai_next) {
    if (a->ai_family != family) continue;
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      return LinkError("bind", errno, "source address " + source.address);
    }
    return Status::Ok();
  }
  return Status(Code::kLinkDown, "connect: source address " + source.address +
                                     " is not of the peer address's family");
}

}  // namespace

Result<Fd> Listen(const std::string& address, uint16_t port, const std::string& ifname) {
  MCDMA_ASSIGN_OR_RETURN(AddrInfoPtr ai, Resolve(address, port, /*passive=*/true));
  Status last(Code::kInvalid, "listen: no usable address for " + address);
  for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    Result<Fd> opened =
        platform::OpenSocket(a->ai_family, a->ai_socktype, a->ai_protocol, kNonBlocking);
    if (!opened.ok()) {
      last = Status(opened.status().code(), opened.status().message() + ": listen " + address);
      continue;
    }
    Fd fd = std::move(opened).value();
    MCDMA_RETURN_IF_ERROR(
        platform::SetSocketInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
    MCDMA_RETURN_IF_ERROR(BindToInterface(fd.get(), ifname));
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = SysError("bind", errno, address + ":" + std::to_string(port));
      continue;
    }
    if (listen(fd.get(), SOMAXCONN) != 0) {
      last = SysError("listen", errno, address);
      continue;
    }
    return fd;
  }
  return last;
}

Result<uint16_t> BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return SysError("getsockname", errno);
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return Status(Code::kInternal, "getsockname: not an IP socket");
}

Status SetDataSocketOptions(int fd) {
  MCDMA_RETURN_IF_ERROR(platform::SetSocketInt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  return platform::SetTcpLiveness(fd, kLiveness);
}

Status SetResetOnClose(int fd) {
  linger reset{.l_onoff = 1, .l_linger = 0};
  if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) != 0) {
    return SysError("setsockopt", errno, "SO_LINGER");
  }
  return Status::Ok();
}

Result<Fd> Dial(const std::string& address, uint16_t port, Deadline deadline,
                const DialSource& source) {
  Result<AddrInfoPtr> resolved = Resolve(address, port, /*passive=*/false);
  if (!resolved.ok()) return Status(Code::kLinkDown, resolved.status().message());
  AddrInfoPtr ai = std::move(resolved).value();
  Status last(Code::kLinkDown, "connect: no usable address for " + address);
  for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    Result<Fd> opened =
        platform::OpenSocket(a->ai_family, a->ai_socktype, a->ai_protocol, kNonBlocking);
    if (!opened.ok()) {
      last = Status(opened.status().code(), opened.status().message() + ": connect " + address);
      continue;
    }
    Fd fd = std::move(opened).value();
    if (Status bound = BindSource(fd.get(), a->ai_family, source); !bound.ok()) {
      last = bound;
      continue;
    }
    if (connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = LinkError("connect", errno, "dialling the peer endpoint");
        continue;
      }
      Status waited = WaitFor(fd.get(), POLLOUT, deadline, "connect");
      if (!waited.ok()) return waited;
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        last = LinkError("connect", err, "dialling the peer endpoint");
        continue;
      }
    }
    MCDMA_RETURN_IF_ERROR(SetDataSocketOptions(fd.get()));
    return fd;
  }
  return last;
}

Status WriteAll(int fd, std::span<const std::byte> bytes, Deadline deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = platform::SendNoSignal(fd, bytes.data() + done, bytes.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      MCDMA_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "handshake send"));
    } else if (n < 0 && errno != EINTR) {
      return LinkError("send", errno, "handshake");
    }
  }
  return Status::Ok();
}

Status ReadExact(int fd, std::span<std::byte> bytes, Deadline deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = recv(fd, bytes.data() + done, bytes.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return Status(Code::kLinkDown, "handshake: the peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      MCDMA_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "handshake receive"));
    } else if (errno != EINTR) {
      return LinkError("recv", errno, "handshake");
    }
  }
  return Status::Ok();
}

}  // namespace mcdma::driver::tcp
