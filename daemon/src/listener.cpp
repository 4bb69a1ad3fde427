#include "listener.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "mcdma_internal/sys.hpp"

namespace mcdma::daemon {
namespace {

constexpr int kBacklog = 128;
constexpr int kSweepMs = 1000;
constexpr int kErrorBackoffMs = 100;
constexpr int64_t kRefusalLogEveryMs = 10'000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

platform::Fd OpenReserve() { return platform::Fd(open("/dev/null", O_RDONLY | O_CLOEXEC)); }

std::string AddressText(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    return buf;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    std::string s = buf;
    // A v4 peer on a dual-stack socket counts as its v4 address.
    if (s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos) return s.substr(7);
    return s;
  }
  return "unknown";
}

}  // namespace

Listener::Listener(std::string name, platform::Fd listen, bool unix_socket, ListenerLimits limits)
    : name_(std::move(name)),
      listen_(std::move(listen)),
      unix_(unix_socket),
      limits_(limits),
      reserve_(OpenReserve()),
      log_(spdlog::get("daemon")) {}

Result<std::unique_ptr<Listener>> Listener::ListenUnix(std::string name, const std::string& path,
                                                       ListenerLimits limits) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status(Code::kInvalid, "socket path is too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  MCDMA_ASSIGN_OR_RETURN(platform::Fd fd, platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0,
                                                               platform::Blocking::kNonBlocking));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SysError("bind", errno, path);
  }
  if (listen(fd.get(), kBacklog) != 0) return SysError("listen", errno, path);
  std::unique_ptr<Listener> l(new Listener(std::move(name), std::move(fd), true, limits));
  MCDMA_ASSIGN_OR_RETURN(auto wake, platform::Wakeup::Create());
  l->wake_.emplace(std::move(wake));
  return l;
}

namespace {

// One listening TCP socket on `a`, or why not.
Result<platform::Fd> BindTcp(const addrinfo& a, const std::string& where) {
  MCDMA_ASSIGN_OR_RETURN(platform::Fd fd, platform::OpenSocket(a.ai_family, SOCK_STREAM, 0,
                                                               platform::Blocking::kNonBlocking));
  MCDMA_RETURN_IF_ERROR(
      platform::SetSocketInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  if (a.ai_family == AF_INET6) {
    // Dual stack: a wildcard listener takes IPv4 peers too, as gRPC's did.
    (void)platform::SetSocketInt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY");
  }
  if (bind(fd.get(), a.ai_addr, a.ai_addrlen) != 0) {
    int err = errno;
    if (err == EADDRINUSE) {
      return Status(Code::kAlreadyExists, where + ": the address is in use (another daemon?)");
    }
    return SysError("bind", err, where);
  }
  if (listen(fd.get(), kBacklog) != 0) return SysError("listen", errno, where);
  return fd;
}

}  // namespace

Result<std::unique_ptr<Listener>> Listener::ListenTcp(std::string name, const std::string& host,
                                                      uint16_t port, ListenerLimits limits) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::string service = std::to_string(port);
  const std::string where = host + ":" + service;
  // 0.0.0.0 and :: mean any address of either family, as they did to gRPC.
  const bool wildcard = host.empty() || host == "*" || host == "0.0.0.0" || host == "::";
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(wildcard ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return Status(Code::kInvalid, "listen " + host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  // IPv6 first for a wildcard (dual stack), then the rest in order.
  std::vector<const addrinfo*> order;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (wildcard && a->ai_family == AF_INET6)
      order.insert(order.begin(), a);
    else
      order.push_back(a);
  }
  Status last(Code::kInvalid, "listen " + host + ": no address");
  for (const addrinfo* a : order) {
    auto fd = BindTcp(*a, where);
    if (!fd.ok()) {
      last = fd.status();
      if (last.code() == Code::kAlreadyExists) return last;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(fd->get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      return SysError("getsockname", errno);
    }
    std::unique_ptr<Listener> l(
        new Listener(std::move(name), std::move(fd).value(), false, limits));
    l->port_ =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    MCDMA_ASSIGN_OR_RETURN(auto wake, platform::Wakeup::Create());
    l->wake_.emplace(std::move(wake));
    return l;
  }
  return last;
}

Listener::~Listener() { Stop(); }

void Listener::Start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { Run(); });
}

void Listener::Stop() {
  if (stop_.exchange(true)) return;
  if (wake_) wake_->Signal();
  if (thread_.joinable()) thread_.join();
  listen_.Reset();
}

void Listener::Run() {
  if (!wake_) return;  // Create() sets it before the thread starts
  platform::Wakeup& wake = *wake_;
  int64_t last_sweep = NowMs();
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {wake.fd(), POLLIN, 0}};
    int n = poll(fds, 2, kSweepMs);
    if (stop_.load(std::memory_order_acquire)) break;
    if (n > 0 && (fds[1].revents & POLLIN) != 0) wake.Drain();
    if (NowMs() - last_sweep >= kSweepMs) {
      MutexLock lock(mu_);
      SweepLocked();
      last_sweep = NowMs();
    }
    if (n > 0 && (fds[0].revents & POLLIN) != 0) AcceptPending();
  }
}

void Listener::AcceptPending() {
  for (int i = 0; i < kBacklog && !stop_.load(std::memory_order_acquire); ++i) {
    platform::Fd c = platform::Accept(listen_.get(), platform::Blocking::kNonBlocking);
    if (!c.valid()) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED) return;
      if (err == EMFILE || err == ENFILE) {
        ShedOne();
        continue;
      }
      {
        MutexLock lock(mu_);
        ++stats_.accept_errors;
      }
      log_->warn("{} listener: accept: {}; retrying in {} ms", name_, std::strerror(err),
                 kErrorBackoffMs);
      std::this_thread::sleep_for(std::chrono::milliseconds(kErrorBackoffMs));
      return;
    }
    std::optional<ConnectionSource> source = Identify(c.get());
    if (!source) continue;  // gone already
    struct stat st {};
    if (fstat(c.get(), &st) != 0) continue;
    const char* refusal = nullptr;
    {
      MutexLock lock(mu_);
      if (open_.size() >= limits_.max_connections ||
          per_source_[source->key] >= limits_.max_per_source) {
        SweepLocked();  // closed connections make room
      }
      if (open_.size() >= limits_.max_connections) {
        ++stats_.refused_limit;
        refusal = "connection limit reached";
      } else if (per_source_[source->key] >= limits_.max_per_source) {
        ++stats_.refused_per_source;
        refusal = "per-source connection limit reached";
      } else {
        if (auto old = open_.find(c.get()); old != open_.end()) ForgetLocked(old);
        ++per_source_[source->key];
        open_[c.get()] =
            Open{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), *source};
        ++stats_.accepted;
      }
      if (refusal == nullptr) {
        // Handed over under the lock: a sweep cannot see the number closed
        // by gRPC before it is recorded.
        handoff_(c.Release());
        continue;
      }
    }
    LogRefusal(refusal, source->key);
  }
}

void Listener::ShedOne() {
  {
    MutexLock lock(mu_);
    ++stats_.shed_out_of_files;
  }
  LogRefusal("out of file descriptors (EMFILE)", "");
  if (reserve_.valid()) {
    reserve_.Reset();
    platform::Fd shed = platform::Accept(listen_.get(), platform::Blocking::kNonBlocking);
    shed.Reset();
    reserve_ = OpenReserve();
  }
  if (!reserve_.valid()) {
    // Not even the reserve came back: wait for descriptors to be freed.
    std::this_thread::sleep_for(std::chrono::milliseconds(kErrorBackoffMs));
    reserve_ = OpenReserve();
  }
}

std::optional<ConnectionSource> Listener::Identify(int fd) const {
  ConnectionSource s;
  if (unix_) {
    auto cred = platform::PeerCredentialsOf(fd);
    if (!cred.ok()) return std::nullopt;
    s.credentials = *cred;
    s.key = "uid " + std::to_string(cred->uid);
    return s;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  s.key = AddressText(ss);
  return s;
}

bool Listener::StillOpenLocked(int fd, const Open& o) const {
  struct stat st {};
  return fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == o.dev &&
         static_cast<uint64_t>(st.st_ino) == o.ino;
}

void Listener::ForgetLocked(std::map<int, Open>::iterator it) {
  auto src = per_source_.find(it->second.source.key);
  if (src != per_source_.end() && --src->second == 0) per_source_.erase(src);
  open_.erase(it);
}

void Listener::SweepLocked() {
  for (auto it = open_.begin(); it != open_.end();) {
    auto next = std::next(it);
    if (!StillOpenLocked(it->first, it->second)) ForgetLocked(it);
    it = next;
  }
}

std::optional<ConnectionSource> Listener::Find(int fd) const {
  MutexLock lock(mu_);
  auto it = open_.find(fd);
  if (it == open_.end() || !StillOpenLocked(fd, it->second)) return std::nullopt;
  return it->second.source;
}

std::optional<ConnectionSource> Listener::FindPeer(const std::string& grpc_peer) const {
  constexpr std::string_view kPrefix = "fd:";
  if (grpc_peer.rfind(kPrefix, 0) != 0) return std::nullopt;
  int fd = -1;
  try {
    size_t used = 0;
    fd = std::stoi(grpc_peer.substr(kPrefix.size()), &used);
    if (used + kPrefix.size() != grpc_peer.size()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return Find(fd);
}

ListenerStats Listener::stats() const {
  MutexLock lock(mu_);
  ListenerStats s = stats_;
  s.open = static_cast<uint32_t>(open_.size());
  for (const auto& [key, n] : per_source_) {
    if (n > s.busiest_source_open) {
      s.busiest_source_open = n;
      s.busiest_source = key;
    }
  }
  return s;
}

void Listener::LogRefusal(const char* what, const std::string& source) {
  int64_t now = NowMs();
  uint64_t skipped = 0;
  {
    MutexLock lock(mu_);
    if (now - last_refusal_log_ms_ < kRefusalLogEveryMs) {
      ++refusals_unlogged_;
      return;
    }
    last_refusal_log_ms_ = now;
    skipped = std::exchange(refusals_unlogged_, 0);
  }
  log_->warn("{} listener: refused a connection{}: {}{}", name_,
             source.empty() ? "" : " from " + source, what,
             skipped > 0
                 ? " (and " + std::to_string(skipped) + " more refusals since the last report)"
                 : "");
}

}  // namespace mcdma::daemon
