// A listening socket whose connections the daemon accepts itself and then
// hands to a gRPC server, so that accepting is bounded and cannot die.
//
// gRPC 1.51's own listener stops accepting for good after one accept(2)
// fails with EMFILE, and it has no cap on connections. Here:
//   * connections are capped in total and per source (the peer's uid on the
//     control socket, its IP address on the peer port); one over a cap is
//     closed at once and counted;
//   * running out of descriptors (EMFILE/ENFILE) sheds the pending
//     connection through a reserve descriptor and keeps listening; other
//     accept errors back off 100 ms and keep listening;
//   * accepted sockets are non-blocking and close-on-exec, and handed over
//     (the handoff owns them): the control socket to
//     grpc::AddInsecureChannelFromFd (its calls then see "fd:N" as their
//     peer, which Find resolves to the kernel's credentials), the peer port
//     to a gRPC external connection acceptor (TLS and the handshake
//     deadline apply as on gRPC's own listener).
// gRPC closes a connection's descriptor itself; the listener notices in a
// sweep (each second, and before refusing for a cap) that the descriptor is
// closed or names another file, and forgets it.
//
// Threading: one accept thread per listener; it alone touches the listening
// socket, the reserve descriptor and the handoff. stats() and Find() from
// any thread: the connection table and the counters are under mu_.
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "mcdma/status.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "platform/fd.hpp"
#include "platform/socket.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::daemon {

struct ListenerLimits {
  uint32_t max_connections = 256;  // open at once
  uint32_t max_per_source = 64;    // open at once from one uid or address
};

struct ListenerStats {
  uint32_t open = 0;                 // connections handed over and not yet closed
  uint64_t accepted = 0;             // handed over, in all
  uint64_t refused_limit = 0;        // closed at once: max_connections reached
  uint64_t refused_per_source = 0;   // closed at once: max_per_source reached
  uint64_t shed_out_of_files = 0;    // closed at once: the process was out of descriptors
  uint64_t accept_errors = 0;        // other accept failures (each backs off 100 ms)
  uint32_t busiest_source_open = 0;  // open connections of the source with the most
  std::string busiest_source;        // that source ("uid 1000", "10.0.0.2"); "" when none
};

// Where a connection comes from.
struct ConnectionSource {
  std::string key;  // what max_per_source counts: "uid N" or the IP address
  std::optional<platform::PeerCredentials> credentials;  // control socket only
};

class Listener {
 public:
  using Handoff = std::function<void(int fd)>;  // takes ownership of fd

  // A bound, listening AF_UNIX socket at `path` (the caller prepared it).
  static Result<std::unique_ptr<Listener>> ListenUnix(std::string name, const std::string& path,
                                                      ListenerLimits limits);
  // A bound, listening TCP socket on host:port (port 0: any). Fails
  // ALREADY_EXISTS when the address is in use.
  static Result<std::unique_ptr<Listener>> ListenTcp(std::string name, const std::string& host,
                                                     uint16_t port, ListenerLimits limits);
  // Stops accepting and closes the listening socket; connections already
  // handed over are gRPC's.
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Starts the accept thread; every accepted connection goes to `handoff`.
  void Start(Handoff handoff);
  // Stops the accept thread (idempotent).
  void Stop();

  // The port bound (TCP).
  uint16_t port() const { return port_; }
  int listen_fd() const { return listen_.get(); }
  // The source of an open connection by its descriptor, if it is one this
  // listener handed over and still the same socket.
  std::optional<ConnectionSource> Find(int fd) const MCDMA_EXCLUDES(mu_);
  // Find for a gRPC peer string "fd:N" (control socket connections).
  std::optional<ConnectionSource> FindPeer(const std::string& grpc_peer) const;
  ListenerStats stats() const MCDMA_EXCLUDES(mu_);
  const ListenerLimits& limits() const { return limits_; }

 private:
  struct Open {
    uint64_t dev = 0;
    uint64_t ino = 0;
    ConnectionSource source;
  };

  Listener(std::string name, platform::Fd listen, bool unix_socket, ListenerLimits limits);
  void Run() MCDMA_EXCLUDES(mu_);
  void AcceptPending() MCDMA_EXCLUDES(mu_);
  // Sheds one pending connection through the reserve descriptor.
  void ShedOne() MCDMA_EXCLUDES(mu_);
  std::optional<ConnectionSource> Identify(int fd) const;
  // Forgets connections whose descriptor was closed.
  void SweepLocked() MCDMA_REQUIRES(mu_);
  void ForgetLocked(std::map<int, Open>::iterator it) MCDMA_REQUIRES(mu_);
  bool StillOpenLocked(int fd, const Open& o) const MCDMA_REQUIRES(mu_);
  void LogRefusal(const char* what, const std::string& source) MCDMA_EXCLUDES(mu_);

  std::string name_;
  platform::Fd listen_;
  bool unix_;
  ListenerLimits limits_;
  uint16_t port_ = 0;
  platform::Fd reserve_;  // an fd kept free for shedding under EMFILE
  std::optional<platform::Wakeup> wake_;
  Handoff handoff_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::shared_ptr<spdlog::logger> log_;

  mutable Mutex mu_;
  std::map<int, Open> open_ MCDMA_GUARDED_BY(mu_);  // by descriptor
  // Open connections by source key.
  std::map<std::string, uint32_t> per_source_ MCDMA_GUARDED_BY(mu_);
  ListenerStats stats_ MCDMA_GUARDED_BY(mu_);
  int64_t last_refusal_log_ms_ MCDMA_GUARDED_BY(mu_) = 0;
  uint64_t refusals_unlogged_ MCDMA_GUARDED_BY(mu_) = 0;
};

}  // namespace mcdma::daemon
