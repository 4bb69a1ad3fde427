// Rails mode's raw TCP alternative: one TCP stream per rail, all at once,
// each bound to its rail's addresses on both ends, moving an equal part of
// the buffer. What the rate-limited wires allow two apps that split the
// transfer themselves, with no daemon. Every socket blocks in the kernel
// and every blocking call has a timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "baselines.hpp"
#include "harness/latency.hpp"
#include "harness/pair_runner.hpp"
#include "link_roles.hpp"
#include "net_util.hpp"
#include "platform/socket.hpp"

namespace mcdma::bench {

using harness::WriteSamples;
using platform::Fd;

// Named, not anonymous: the target is a unity build (see link_rails.cpp).
namespace rails_tcp {

// Per stream: the client sends {op, offset, length}; for kPush `length`
// bytes follow, stored at `offset` of the server's buffer, and the server
// answers one byte once all are in; for kPull the server sends `length`
// bytes from `offset`.
struct RailHeader {
  uint64_t op;
  uint64_t offset;
  uint64_t length;
};
constexpr uint64_t kPush = 1;
constexpr uint64_t kPull = 2;

mcdma::Result<Fd> TcpSocket() {
  return platform::OpenSocket(AF_INET, SOCK_STREAM, 0, platform::Blocking::kBlocking);
}

mcdma::Status Bind(int fd, const std::string& host, uint16_t port) {
  MCDMA_ASSIGN_OR_RETURN(sockaddr_in sa, ParseAddress(host, port));
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return SysError("bind " + host + ":" + std::to_string(port));
  return mcdma::Status::Ok();
}

mcdma::Status ServeRail(int fd, std::vector<std::byte>& buf) {
  for (;;) {
    RailHeader h;
    mcdma::Status st = RecvAll(fd, reinterpret_cast<std::byte*>(&h), sizeof(h));
    if (st.code() == mcdma::Code::kPeerGone) return mcdma::Status::Ok();  // client done
    MCDMA_RETURN_IF_ERROR(st);
    if (h.offset > buf.size() || h.length > buf.size() - h.offset ||
        (h.op != kPush && h.op != kPull)) {
      return mcdma::Status(mcdma::Code::kInvalid, "bad rail request");
    }
    if (h.op == kPush) {
      MCDMA_RETURN_IF_ERROR(RecvAll(fd, buf.data() + h.offset, h.length));
      std::byte ack{1};
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, &ack, 1));
    } else {
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, buf.data() + h.offset, h.length));
    }
  }
}

// Runs fn(i) for i in [0, n) on n threads at once; the first failure.
template <typename Fn>
mcdma::Status OnEveryRail(size_t n, Fn&& fn) {
  std::vector<mcdma::Status> results(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { results[i] = fn(i); });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (!results[i].ok()) {
      return mcdma::Status(results[i].code(),
                           "rail " + std::to_string(i + 1) + ": " + results[i].message());
    }
  }
  return mcdma::Status::Ok();
}

int ServerMain(const LinkRoleOptions& options) {
  if (options.rails.empty()) {
    return FailRole(options, mcdma::Status(mcdma::Code::kInvalid, "no --rails given"));
  }
  const auto limit = std::chrono::milliseconds(options.run_limit_ms);
  std::vector<Fd> listeners;
  for (const std::string& address : options.rails) {
    auto fd = TcpSocket();
    if (!fd.ok()) return FailRole(options, fd.status());
    mcdma::Status st = Bind(fd->get(), address, kRailsTcpPort);
    if (st.ok() && listen(fd->get(), 4) != 0) st = SysError("listen " + address);
    if (!st.ok()) return FailRole(options, st);
    listeners.push_back(std::move(*fd));
  }
  std::vector<std::byte> buf(options.bulk_bytes);  // zero-filled: every page touched
  harness::SignalReady(options.ready_fd);
  // One connection per rail, on that rail's listener.
  std::vector<Fd> conns;
  for (Fd& l : listeners) {
    mcdma::Status st = harness::WaitReadable(l.get(), limit);
    if (!st.ok()) return FailRole(options, st);
    Fd conn = platform::Accept(l.get(), platform::Blocking::kBlocking);
    if (!conn.valid()) return FailRole(options, SysError("accept"));
    st = SetSocketTimeouts(conn.get(), limit);
    if (!st.ok()) return FailRole(options, st);
    conns.push_back(std::move(conn));
  }
  mcdma::Status st =
      OnEveryRail(conns.size(), [&](size_t i) { return ServeRail(conns[i].get(), buf); });
  return st.ok() ? 0 : FailRole(options, st);
}

int ClientMain(const LinkRoleOptions& options) {
  const size_t n = options.rails.size();
  if (n == 0) return FailRole(options, mcdma::Status(mcdma::Code::kInvalid, "no --rails given"));
  const auto limit = std::chrono::milliseconds(options.run_limit_ms);
  std::vector<Fd> conns;
  for (const std::string& pair : options.rails) {
    size_t gt = pair.find('>');
    if (gt == std::string::npos) {
      return FailRole(options,
                      mcdma::Status(mcdma::Code::kInvalid, "expected LOCAL>REMOTE, got " + pair));
    }
    const std::string local = pair.substr(0, gt);
    const std::string remote = pair.substr(gt + 1);
    auto fd = TcpSocket();
    if (!fd.ok()) return FailRole(options, fd.status());
    // From this rail's address to the peer's: the stream takes this rail.
    mcdma::Status st = Bind(fd->get(), local, 0);
    if (st.ok()) st = SetSocketTimeouts(fd->get(), limit);  // SO_SNDTIMEO bounds connect()
    auto to = ParseAddress(remote, kRailsTcpPort);
    if (st.ok() && !to.ok()) st = to.status();
    if (st.ok() && connect(fd->get(), reinterpret_cast<sockaddr*>(&*to), sizeof(*to)) != 0)
      st = SysError("connect " + pair);
    if (!st.ok()) return FailRole(options, st);
    conns.push_back(std::move(*fd));
  }
  std::vector<std::byte> local(options.bulk_bytes);
  // Stream i moves [begin(i), begin(i + 1)).
  auto begin = [&](size_t i) { return options.bulk_bytes * i / n; };
  auto push = [&]() {
    return OnEveryRail(n, [&](size_t i) -> mcdma::Status {
      RailHeader h{kPush, begin(i), begin(i + 1) - begin(i)};
      int fd = conns[i].get();
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const std::byte*>(&h), sizeof(h)));
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, local.data() + h.offset, h.length));
      std::byte ack;
      return RecvAll(fd, &ack, 1);
    });
  };
  auto pull = [&]() {
    return OnEveryRail(n, [&](size_t i) -> mcdma::Status {
      RailHeader h{kPull, begin(i), begin(i + 1) - begin(i)};
      int fd = conns[i].get();
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const std::byte*>(&h), sizeof(h)));
      return RecvAll(fd, local.data() + h.offset, h.length);
    });
  };
  auto sets = MeasureBulk(local, options.repeats, push, pull);
  if (!sets.ok()) return FailRole(options, sets.status());
  mcdma::Status st = WriteSamples(options.out, *sets);
  return st.ok() ? 0 : FailRole(options, st);
}

}  // namespace rails_tcp

int RunTcpRailsServer(const LinkRoleOptions& options) { return rails_tcp::ServerMain(options); }
int RunTcpRailsClient(const LinkRoleOptions& options) { return rails_tcp::ClientMain(options); }

}  // namespace mcdma::bench
