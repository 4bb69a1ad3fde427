// The daemon: everything mcdma-rpcd runs, started in order by
// Daemon::Start and stopped in the reverse order by ~Daemon. main() (and
// the in-process test fixture) own one; signals are main's (stop_signals).
//
// Start order: the fabric key, the budgets (open files, /dev/shm:
// budgets.hpp), the devices and engine (MakeEngine), so that a bad key,
// budget or device stops the daemon before it touches the socket; the
// control socket's path and its listener (listener.hpp: the daemon accepts
// connections itself); the engine thread; the peer plane; the control and
// admin services and their gRPC server; then the listener starts handing
// connections to the server; the watchdog. The members are
// declared so that their destruction undoes it: watchdog, server (300 ms
// grace), services, peer plane (Goodbye to peers), engine (its thread, then
// its devices), socket file.
#pragma once

#include <grpcpp/server.h>
#include <spdlog/logger.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config/options.hpp"
#include "listener.hpp"
#include "mcdma/status.hpp"
#include "socket_path.hpp"
#include "watchdog.hpp"

namespace mcdma::daemon {

class Engine;
class PeerPlane;
class ControlService;
class AdminService;
class MetricsEndpoint;

// Sets up spdlog loggers ("daemon", "engine", "control", "peer") at
// `level`; loggers that exist already are left as they are.
void SetUpLogging(const std::string& level);

// The devices (loop; tcp for links and verbs when peering is on) and the
// engine over them, not yet started.
Result<std::unique_ptr<Engine>> MakeEngine(const Options& options, bool peering);

// Threads: Start, Drain and the destructor are called from one thread (the
// main thread); the engine, gRPC and the peer plane run their own.
class Daemon {
 public:
  // Starts serving on options.socket (`options` validated). On failure
  // what was started is stopped again, in reverse order.
  static Result<std::unique_ptr<Daemon>> Start(const Options& options);
  // Drains first if Drain() was not called, then stops everything in the
  // reverse order of start and removes the socket file.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // SIGTERM's path (`why` is logged): new sessions and new work are refused,
  // in-flight calls and transfers get up to drain_timeout_ms, peers hear
  // Goodbye, then every session is closed (UNAVAILABLE). Once.
  void Drain(std::string_view why);

  const Options& options() const { return options_; }
  Engine& engine() { return *engine_; }
  // The peer service's address; "" when peering is off.
  std::string peer_address() const;

 private:
  explicit Daemon(const Options& options);
  Status StartAll();

  struct StopServer {
    void operator()(grpc::Server* server) const;
  };

  Options options_;
  std::shared_ptr<spdlog::logger> log_;
  std::optional<SocketPath> socket_;
  // Stopped by ~Daemon before the server shuts down (no handoff to a
  // server that is going); destroyed after the engine.
  std::unique_ptr<Listener> control_listener_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<PeerPlane> peers_;
  std::unique_ptr<ControlService> control_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server, StopServer> server_;
  // Calls admin_ from its own threads: stopped first.
  std::unique_ptr<MetricsEndpoint> metrics_;
  std::optional<Watchdog> watchdog_;
  bool serving_ = false;  // Start completed
  bool drained_ = false;
};

}  // namespace mcdma::daemon
