// The TCP baselines of mcdma_bench_link: a raw ping-pong, gRPC unary over
// TCP and a raw single-stream bulk transfer. Every socket blocks in the
// kernel (no spinning) and every blocking call has a timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "baselines.hpp"
#include "harness/latency.hpp"
#include "harness/pair_runner.hpp"
#include "link_roles.hpp"
#include "net_util.hpp"
#include "platform/socket.hpp"

namespace mcdma::bench {

using harness::SignalReadyPort;
using harness::WaitReadable;
using harness::WriteSamples;
using platform::Fd;

namespace {

// Bulk protocol: the client sends {op, length}; for kPush `length` bytes
// follow and the server answers one byte once all are in its buffer; for
// kPull the server sends `length` bytes from its buffer.
struct BulkHeader {
  uint64_t op;
  uint64_t length;
};
constexpr uint64_t kPush = 1;
constexpr uint64_t kPull = 2;

// A listening socket on `host`, port chosen by the kernel.
mcdma::Result<Fd> ListenTcp(const std::string& host, uint16_t* port) {
  MCDMA_ASSIGN_OR_RETURN(sockaddr_in sa, ParseAddress(host, 0));
  MCDMA_ASSIGN_OR_RETURN(Fd fd, mcdma::platform::OpenSocket(AF_INET, SOCK_STREAM, 0,
                                                            mcdma::platform::Blocking::kBlocking));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return SysError("bind " + host);
  if (listen(fd.get(), 4) != 0) return SysError("listen");
  socklen_t len = sizeof(sa);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return SysError("getsockname");
  *port = ntohs(sa.sin_port);
  return fd;
}

mcdma::Result<Fd> AcceptWithin(int listen_fd, std::chrono::milliseconds timeout) {
  MCDMA_RETURN_IF_ERROR(WaitReadable(listen_fd, timeout));
  Fd fd = mcdma::platform::Accept(listen_fd, mcdma::platform::Blocking::kBlocking);
  if (!fd.valid()) return SysError("accept");
  return fd;
}

mcdma::Result<Fd> ConnectTcp(const std::string& address, std::chrono::milliseconds timeout) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos)
    return mcdma::Status(mcdma::Code::kInvalid, "expected HOST:PORT, got " + address);
  MCDMA_ASSIGN_OR_RETURN(
      sockaddr_in sa, ParseAddress(address.substr(0, colon), std::stoi(address.substr(colon + 1))));
  MCDMA_ASSIGN_OR_RETURN(Fd fd, mcdma::platform::OpenSocket(AF_INET, SOCK_STREAM, 0,
                                                            mcdma::platform::Blocking::kBlocking));
  // SO_SNDTIMEO bounds connect() as well.
  MCDMA_RETURN_IF_ERROR(SetSocketTimeouts(fd.get(), timeout));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return SysError("connect " + address);
  return fd;
}

mcdma::Status SetNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return SysError("setsockopt(TCP_NODELAY)");
  return mcdma::Status::Ok();
}

// Accepts the one client a server serves, with its socket set up.
mcdma::Result<Fd> AcceptClient(const LinkRoleOptions& options, int listen_fd, bool nodelay) {
  MCDMA_ASSIGN_OR_RETURN(Fd conn,
                         AcceptWithin(listen_fd, std::chrono::milliseconds(options.run_limit_ms)));
  if (nodelay) MCDMA_RETURN_IF_ERROR(SetNoDelay(conn.get()));
  MCDMA_RETURN_IF_ERROR(
      SetSocketTimeouts(conn.get(), std::chrono::milliseconds(options.run_limit_ms)));
  return conn;
}

mcdma::Status ServeBulk(const LinkRoleOptions& options, int fd, std::vector<std::byte>& buf) {
  for (;;) {
    BulkHeader h;
    mcdma::Status st = RecvAll(fd, reinterpret_cast<std::byte*>(&h), sizeof(h));
    if (st.code() == mcdma::Code::kPeerGone) return mcdma::Status::Ok();  // client done
    MCDMA_RETURN_IF_ERROR(st);
    if (h.length > buf.size() || (h.op != kPush && h.op != kPull))
      return mcdma::Status(mcdma::Code::kInvalid, "bad bulk request");
    if (h.op == kPush) {
      MCDMA_RETURN_IF_ERROR(RecvAll(fd, buf.data(), h.length));
      std::byte ack{1};
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, &ack, 1));
    } else {
      MCDMA_RETURN_IF_ERROR(WriteAll(fd, buf.data(), h.length));
    }
  }
}

}  // namespace

int FailRole(const RoleOptions& options, const mcdma::Status& status) {
  fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
          status.message().c_str());
  return 1;
}

namespace {

// Word i of round r's pattern; every word differs from its neighbours and
// from the same word of other rounds, so a missed or misplaced piece shows.
uint64_t PatternWord(size_t i, uint64_t round) {
  return (i + 1) * 0x9E3779B97F4A7C15ull ^ (round + 1) * 0xD1B54A32D192ED03ull;
}

}  // namespace

void FillBulkPattern(std::span<std::byte> buf, uint64_t round) {
  size_t words = buf.size() / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) {
    uint64_t v = PatternWord(i, round);
    std::memcpy(buf.data() + i * sizeof(v), &v, sizeof(v));
  }
  for (size_t i = words * sizeof(uint64_t); i < buf.size(); ++i)
    buf[i] = static_cast<std::byte>(round + i);
}

mcdma::Status CheckBulkPattern(std::span<const std::byte> buf, uint64_t round) {
  size_t words = buf.size() / sizeof(uint64_t);
  size_t bad = buf.size();
  for (size_t i = 0; i < words && bad == buf.size(); ++i) {
    uint64_t v;
    std::memcpy(&v, buf.data() + i * sizeof(v), sizeof(v));
    if (v != PatternWord(i, round)) bad = i * sizeof(v);
  }
  for (size_t i = words * sizeof(uint64_t); i < buf.size() && bad == buf.size(); ++i) {
    if (buf[i] != static_cast<std::byte>(round + i)) bad = i;
  }
  if (bad == buf.size()) return mcdma::Status::Ok();
  return mcdma::Status(mcdma::Code::kInternal,
                       "bulk data read back differs from what was written at byte " +
                           std::to_string(bad) + " (round " + std::to_string(round) + ")");
}

int RunTcpEchoServer(const LinkRoleOptions& options) {
  uint16_t port = 0;
  auto listener = ListenTcp(options.address, &port);
  if (!listener.ok()) return FailRole(options, listener.status());
  SignalReadyPort(options.ready_fd, port);
  auto conn = AcceptClient(options, listener->get(), true);
  if (!conn.ok()) return FailRole(options, conn.status());
  return EchoFrames(options, conn->get());
}

int RunTcpEchoClient(const LinkRoleOptions& options) {
  auto conn = ConnectTcp(options.address, std::chrono::milliseconds(options.timeout_ms));
  if (!conn.ok()) return FailRole(options, conn.status());
  mcdma::Status st = SetNoDelay(conn->get());
  if (!st.ok()) return FailRole(options, st);
  return TimeFrames(options, conn->get());
}

// The same ping-pong with the daemon's wait policy: each read polls for
// 50 us (yielding) before it blocks, so neither side pays a wake-up while
// the other answers quickly.
constexpr std::chrono::microseconds kSpin(50);

int RunTcpSpinEchoServer(const LinkRoleOptions& options) {
  uint16_t port = 0;
  auto listener = ListenTcp(options.address, &port);
  if (!listener.ok()) return FailRole(options, listener.status());
  SignalReadyPort(options.ready_fd, port);
  auto conn = AcceptClient(options, listener->get(), true);
  if (!conn.ok()) return FailRole(options, conn.status());
  return EchoFrames(options, conn->get(), kSpin);
}

int RunTcpSpinEchoClient(const LinkRoleOptions& options) {
  auto conn = ConnectTcp(options.address, std::chrono::milliseconds(options.timeout_ms));
  if (!conn.ok()) return FailRole(options, conn.status());
  mcdma::Status st = SetNoDelay(conn->get());
  if (!st.ok()) return FailRole(options, st);
  return TimeFrames(options, conn->get(), kSpin);
}

namespace {

// One relay hop of the tcprelay row: each frame from `down` goes to `up`,
// and the one frame that answers it comes back, with the spin-then-block
// wait on both reads. Ends when `down` closes between frames.
mcdma::Status RelayFrames(int down, int up) {
  std::vector<std::byte> buf;
  for (;;) {
    auto request = ReadFrame(down, buf, kSpin);
    if (!request.ok() && request.status().code() == mcdma::Code::kPeerGone) {
      return mcdma::Status::Ok();
    }
    MCDMA_RETURN_IF_ERROR(request.status());
    MCDMA_RETURN_IF_ERROR(WriteAll(up, buf.data(), sizeof(uint32_t) + *request));
    MCDMA_ASSIGN_OR_RETURN(uint32_t reply, ReadFrame(up, buf, kSpin));
    MCDMA_RETURN_IF_ERROR(WriteAll(down, buf.data(), sizeof(uint32_t) + reply));
  }
}

// Runs `child` in a forked process that shares this one's network
// namespace, keeps one end of a Unix socket pair for itself and gives the
// other to `child` (both with the role's timeouts). Returns the parent's end
// and the child's pid.
template <typename Child>
mcdma::Result<std::pair<Fd, pid_t>> ForkWithPair(const LinkRoleOptions& options, Child&& child) {
  Fd mine;
  Fd theirs;
  MCDMA_RETURN_IF_ERROR(mcdma::platform::OpenSocketPair(SOCK_STREAM, &mine, &theirs));
  for (int fd : {mine.get(), theirs.get()}) {
    MCDMA_RETURN_IF_ERROR(SetSocketTimeouts(fd, std::chrono::milliseconds(options.run_limit_ms)));
  }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return SysError("fork");
  if (pid == 0) {
    mine.Reset();
    // The orchestrator reads the ready pipe to its end: only the role's
    // own process may hold it.
    if (options.ready_fd >= 0) close(options.ready_fd);
    _exit(child(theirs.get()));
  }
  return std::make_pair(std::move(mine), pid);
}

// The exit code of both processes: `own` unless the child failed.
int JoinChild(const LinkRoleOptions& options, pid_t pid, int own) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return own;
  return FailRole(options,
                  mcdma::Status(mcdma::Code::kInternal, "relay child process failed (wait status " +
                                                            std::to_string(status) + ")"));
}

}  // namespace

// Host B: a relay process (this one) on the TCP side, the echo server as a
// forked process behind a Unix socket pair, like a daemon and its app.
int RunTcpRelayServer(const LinkRoleOptions& options) {
  uint16_t port = 0;
  auto listener = ListenTcp(options.address, &port);
  if (!listener.ok()) return FailRole(options, listener.status());
  auto app = ForkWithPair(options, [&](int fd) { return EchoFrames(options, fd, kSpin); });
  if (!app.ok()) return FailRole(options, app.status());
  SignalReadyPort(options.ready_fd, port);
  mcdma::Status st = [&]() -> mcdma::Status {
    MCDMA_ASSIGN_OR_RETURN(Fd conn, AcceptClient(options, listener->get(), true));
    return RelayFrames(conn.get(), app->first.get());
  }();
  app->first.Reset();  // the echo server sees EOF and ends
  return JoinChild(options, app->second, st.ok() ? 0 : FailRole(options, st));
}

// Host A: the timing client (this process) behind a Unix socket pair, the
// relay to host B as a forked process.
int RunTcpRelayClient(const LinkRoleOptions& options) {
  auto conn = ConnectTcp(options.address, std::chrono::milliseconds(options.timeout_ms));
  if (!conn.ok()) return FailRole(options, conn.status());
  mcdma::Status st = SetNoDelay(conn->get());
  if (!st.ok()) return FailRole(options, st);
  auto relay = ForkWithPair(options, [&](int fd) {
    mcdma::Status relayed = RelayFrames(fd, conn->get());
    return relayed.ok() ? 0 : FailRole(options, relayed);
  });
  if (!relay.ok()) return FailRole(options, relay.status());
  conn->Reset();  // the relay owns the TCP connection now
  int own = TimeFrames(options, relay->first.get(), kSpin);
  relay->first.Reset();
  return JoinChild(options, relay->second, own);
}

int RunGrpcTcpServer(const LinkRoleOptions& options) {
  return RunGrpcEchoServer(options, options.address + ":0", true);
}

int RunGrpcTcpClient(const LinkRoleOptions& options) {
  return RunGrpcEchoClient(options, "ipv4:" + options.address);
}

int RunTcpBulkServer(const LinkRoleOptions& options) {
  uint16_t port = 0;
  auto listener = ListenTcp(options.address, &port);
  if (!listener.ok()) return FailRole(options, listener.status());
  std::vector<std::byte> buf(options.bulk_bytes);  // zero-filled: every page touched
  SignalReadyPort(options.ready_fd, port);
  auto conn = AcceptClient(options, listener->get(), false);
  if (!conn.ok()) return FailRole(options, conn.status());
  mcdma::Status st = ServeBulk(options, conn->get(), buf);
  return st.ok() ? 0 : FailRole(options, st);
}

int RunTcpBulkClient(const LinkRoleOptions& options) {
  auto conn = ConnectTcp(options.address, std::chrono::milliseconds(options.run_limit_ms));
  if (!conn.ok()) return FailRole(options, conn.status());
  int fd = conn->get();
  std::vector<std::byte> local(options.bulk_bytes);
  auto push = [&]() -> mcdma::Status {
    BulkHeader h{kPush, local.size()};
    MCDMA_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const std::byte*>(&h), sizeof(h)));
    MCDMA_RETURN_IF_ERROR(WriteAll(fd, local.data(), local.size()));
    std::byte ack;
    return RecvAll(fd, &ack, 1);
  };
  auto pull = [&]() -> mcdma::Status {
    BulkHeader h{kPull, local.size()};
    MCDMA_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<const std::byte*>(&h), sizeof(h)));
    return RecvAll(fd, local.data(), local.size());
  };
  auto sets = MeasureBulk(local, options.repeats, push, pull);
  if (!sets.ok()) return FailRole(options, sets.status());
  mcdma::Status st = WriteSamples(options.out, *sets);
  return st.ok() ? 0 : FailRole(options, st);
}

}  // namespace mcdma::bench
