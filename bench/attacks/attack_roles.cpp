#include "attack_roles.hpp"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "mcdma/client.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "platform/socket.hpp"

namespace mcdma::bench::attacks {
namespace {

using std::chrono::milliseconds;

const std::vector<AttackInfo> kAttacks = {
    {"fds", "control-socket connections until refused (held) + 4 KiB buffers until refused"},
    {"memory", "a service that never reads, flooded with 1 MiB notifications until refused"},
    {"shm", "1 MiB buffers until refused (held)"},
    {"peer", "keyless: Authenticate streams sending only a hello + raw TCP to the peer port"},
    {"frag", "its daemon arena half left with every other 8 KiB event held, then small events"},
    {"sessions", "sessions until refused (held)"},
};

// "BUSY/BACKLOG_FULL (message)", the message cut short.
std::string Named(const mcdma::Status& st) {
  std::string out = mcdma::CodeName(st.code());
  if (st.reason() != mcdma::Reason::kNone) out += std::string("/") + mcdma::ReasonName(st.reason());
  std::string msg = st.message();
  if (msg.size() > 90) msg = msg.substr(0, 90) + "...";
  return out + " (" + msg + ")";
}

void Report(int ready_fd, const std::string& line) {
  std::string text = line + "\n";
  (void)!write(ready_fd, text.data(), text.size());
  close(ready_fd);
}

[[noreturn]] void HoldUntilKilled() {
  for (;;) pause();
}

mcdma::Result<std::unique_ptr<mcdma::Client>> Open(const std::string& socket, const char* name,
                                                   uint64_t arena, int handler_threads = 0) {
  mcdma::ClientOptions o;
  o.socket = socket;
  o.app_name = name;
  o.arena_bytes = arena;
  o.handler_threads = handler_threads;
  o.connect_timeout = milliseconds(3000);
  return mcdma::Client::Connect(o);
}

// How many of `fds` the other side has closed (EOF or hang-up) by now; data
// waiting to be read (a gRPC server's HTTP/2 settings) is not a close.
int CountClosed(const std::vector<int>& fds) {
  std::vector<pollfd> p;
  p.reserve(fds.size());
  for (int fd : fds) p.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
  if (p.empty() || poll(p.data(), p.size(), 0) < 0) return 0;
  int closed = 0;
  for (const pollfd& q : p) closed += (q.revents & (POLLHUP | POLLRDHUP)) != 0;
  return closed;
}

// A blocking socket of `family` connected to `addr`; -1 (errno kept) when
// the socket or the connection fails.
int RawConnect(int family, const sockaddr* addr, socklen_t len) {
  auto opened =
      mcdma::platform::OpenSocket(family, SOCK_STREAM, 0, mcdma::platform::Blocking::kBlocking);
  if (!opened.ok()) return -1;
  if (connect(opened->get(), addr, len) != 0) {
    int err = errno;
    opened->Reset();
    errno = err;
    return -1;
  }
  return opened->Release();
}

int RawUnixConnect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return RawConnect(AF_UNIX, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
}

int RawTcpConnect(const std::string& ip, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    errno = EINVAL;
    return -1;
  }
  return RawConnect(AF_INET, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
}

int Fds(const std::string& socket, int ready_fd) {
  auto c = Open(socket, "attack-fds", 64 << 10);
  if (!c.ok()) return Report(ready_fd, "no session: " + Named(c.status())), 1;
  std::vector<mcdma::Buffer> buffers;
  mcdma::Status refused;
  for (int i = 0; i < 100000; ++i) {
    auto b = (*c)->Alloc(4096);
    if (!b.ok()) {
      refused = b.status();
      break;
    }
    buffers.push_back(std::move(b).value());
  }
  std::vector<int> held;
  int own_errno = 0;
  for (int i = 0; i < 100000; ++i) {
    int fd = RawUnixConnect(socket);
    if (fd < 0) {
      own_errno = errno;
      break;
    }
    held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(500));
  int closed = CountClosed(held);
  Report(ready_fd, "4 KiB buffers: " + std::to_string(buffers.size()) + " then " + Named(refused) +
                       "; control connections: " + std::to_string(held.size()) +
                       " opened (then its own " +
                       (own_errno != 0 ? strerror(own_errno) : "no error") + "), " +
                       std::to_string(closed) + " closed at once by the daemon");
  HoldUntilKilled();
}

int Memory(const std::string& socket, int ready_fd) {
  auto hog = Open(socket, "attack-never-reads", 4 << 20);
  auto flood = Open(socket, "attack-flood", 4 << 20);
  if (!hog.ok() || !flood.ok()) {
    return Report(ready_fd, "no session: " + Named(hog.ok() ? flood.status() : hog.status())), 1;
  }
  // The handler never returns: the progress thread is stuck, nothing is read.
  static std::mutex mu;
  static std::condition_variable cv;
  auto served = (*hog)->Serve(kSinkService, [](mcdma::ServerCall&) {
    std::unique_lock lock(mu);
    cv.wait(lock, [] { return false; });
  });
  if (!served.ok()) return Report(ready_fd, "Serve: " + Named(served.status())), 1;
  std::vector<std::byte> big(1 << 20, std::byte{0x5a});
  int sent = 0;
  mcdma::Status last;
  for (; sent < 10000; ++sent) {
    last = (*flood)->Notify(kSinkService, big, milliseconds(5000));
    if (!last.ok()) break;
  }
  Report(ready_fd,
         "1 MiB notifications: " + std::to_string(sent) + " accepted, then " + Named(last));
  HoldUntilKilled();
}

int Shm(const std::string& socket, int ready_fd) {
  auto c = Open(socket, "attack-shm", 64 << 10);
  if (!c.ok()) return Report(ready_fd, "no session: " + Named(c.status())), 1;
  std::vector<mcdma::Buffer> held;
  mcdma::Status refused;
  for (int i = 0; i < 100000; ++i) {
    auto b = (*c)->Alloc(1 << 20);
    if (!b.ok()) {
      refused = b.status();
      break;
    }
    std::memset(b->data(), 0xa5, b->size());
    held.push_back(std::move(b).value());
  }
  Report(ready_fd, "1 MiB buffers: " + std::to_string(held.size()) + " then " + Named(refused));
  HoldUntilKilled();
}

using AuthStream = grpc::ClientReaderWriter<mcdma::v1::AuthRequest, mcdma::v1::AuthResponse>;
struct Stalled {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<mcdma::v1::Peer::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<AuthStream> stream;
  bool challenged = false;
};

// One Authenticate stream on its own connection: hello, never the proof
// (inproc_peer_gate_test.cpp's StallOne).
std::unique_ptr<Stalled> StallOne(const std::string& address) {
  auto s = std::make_unique<Stalled>();
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  s->channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  s->stub = mcdma::v1::Peer::NewStub(s->channel);
  s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  s->stream = s->stub->Authenticate(&s->ctx);
  mcdma::v1::AuthRequest hello;
  hello.mutable_hello()->set_version(1);
  hello.mutable_hello()->set_host_id("keyless");
  hello.mutable_hello()->set_nonce(std::string(32, 'n'));
  s->stream->Write(hello);
  mcdma::v1::AuthResponse resp;
  s->challenged = s->stream->Read(&resp) && resp.has_challenge();
  return s;
}

int Peer(const std::string& ip, int port, int ready_fd) {
  const std::string address = ip + ":" + std::to_string(port);
  constexpr int kStreams = 12;
  constexpr int kTcp = 40;
  std::vector<std::unique_ptr<Stalled>> streams;
  int challenged = 0;
  std::string refusal;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(StallOne(address));
    if (streams.back()->challenged) {
      ++challenged;
    } else if (refusal.empty()) {
      grpc::Status st = streams.back()->stream->Finish();
      refusal = std::to_string(st.error_code()) + " " + st.error_message().substr(0, 80);
    }
  }
  std::vector<int> tcp;
  for (int i = 0; i < kTcp; ++i) {
    int fd = RawTcpConnect(ip, port);
    if (fd >= 0) tcp.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(500));
  Report(ready_fd, "Authenticate (hello only): " + std::to_string(challenged) + " of " +
                       std::to_string(kStreams) + " challenged, the rest refused (first: grpc " +
                       refusal + "); raw TCP: " + std::to_string(tcp.size()) + " opened, " +
                       std::to_string(CountClosed(tcp)) + " closed at once");
  HoldUntilKilled();
}

int Frag(const std::string& socket, int ready_fd) {
  constexpr uint64_t kHeld = 128;        // events sent to lay the pattern
  constexpr size_t kLayBytes = 8 << 10;  // 128 x 8 KiB: half of the 2 MiB daemon half
  static std::atomic<uint64_t> returned{0};
  static std::atomic<uint64_t> blocked{0};
  static std::mutex mu;
  static std::condition_variable cv;
  // 64 handler threads hold the odd events of the pattern; 8 serve the rest.
  auto holder = Open(socket, "attack-frag-holder", 4 << 20, 72);
  auto sender = Open(socket, "attack-frag-sender", 4 << 20);
  if (!holder.ok() || !sender.ok()) {
    return Report(ready_fd,
                  "no session: " + Named(holder.ok() ? sender.status() : holder.status())),
           1;
  }
  auto served = (*holder)->Serve(kSinkService, [](mcdma::ServerCall& call) {
    uint64_t seq = 0;
    std::memcpy(&seq, call.payload().data(), sizeof(seq));
    if (seq < kHeld && seq % 2 == 1) {
      blocked.fetch_add(1);
      std::unique_lock lock(mu);
      cv.wait(lock, [] { return false; });
    }
    returned.fetch_add(1);
  });
  if (!served.ok()) return Report(ready_fd, "Serve: " + Named(served.status())), 1;
  std::vector<std::byte> msg(16 << 10);
  mcdma::Status first_error;
  for (uint64_t seq = 0; seq < kHeld; ++seq) {
    std::memcpy(msg.data(), &seq, sizeof(seq));
    mcdma::Status st =
        (*sender)->Notify(kSinkService, std::span(msg.data(), kLayBytes), milliseconds(5000));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  for (int i = 0; i < 500 && blocked.load() + returned.load() < kHeld; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  Report(ready_fd, "8 KiB events held: " + std::to_string(blocked.load()) + " (every other one), " +
                       std::to_string(returned.load()) + " released" +
                       (first_error.ok() ? "" : ", error " + Named(first_error)) +
                       "; then 64 B..16 KiB notifications every 200 us while held");
  // Keep the daemon allocating into the holed arena while the phase runs.
  // The same sizes every run.
  std::mt19937 rng(7);  // NOLINT(bugprone-random-generator-seed)
  std::uniform_int_distribution<size_t> size(64, 16 << 10);
  for (uint64_t seq = kHeld;; ++seq) {
    std::memcpy(msg.data(), &seq, sizeof(seq));
    (void)(*sender)->Notify(kSinkService, std::span(msg.data(), size(rng)), milliseconds(5000));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

int Sessions(const std::string& socket, int ready_fd) {
  std::vector<std::unique_ptr<mcdma::Client>> held;
  mcdma::Status refused;
  for (int i = 0; i < 1000; ++i) {
    auto c = Open(socket, "attack-slot", 64 << 10);
    if (!c.ok()) {
      refused = c.status();
      break;
    }
    held.push_back(std::move(c).value());
  }
  Report(ready_fd, "sessions: " + std::to_string(held.size()) + " opened, then " + Named(refused));
  HoldUntilKilled();
}

}  // namespace

const std::vector<AttackInfo>& Attacks() { return kAttacks; }

int RunAttacker(const std::string& role, const std::string& socket, const std::string& peer_ip,
                int peer_port, int ready_fd) {
  if (role == "fds") return Fds(socket, ready_fd);
  if (role == "memory") return Memory(socket, ready_fd);
  if (role == "shm") return Shm(socket, ready_fd);
  if (role == "peer") return Peer(peer_ip, peer_port, ready_fd);
  if (role == "frag") return Frag(socket, ready_fd);
  if (role == "sessions") return Sessions(socket, ready_fd);
  Report(ready_fd, "unknown attack " + role);
  return 2;
}

}  // namespace mcdma::bench::attacks
