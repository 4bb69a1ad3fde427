#include "daemon.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "budgets.hpp"
#include "driver/loop/loop_transport.hpp"
#include "engine/engine.hpp"
#include "mcdma_auth/fabric_key.hpp"
#include "metrics/metrics_endpoint.hpp"
#include "peer/peer_plane.hpp"
#include "platform/process.hpp"
#include "platform/service_manager.hpp"
#include "platform/shm.hpp"
#include "service/admin_service.hpp"
#include "service/control_service.hpp"
#include "verbs_support.hpp"

namespace mcdma::daemon {

void SetUpLogging(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  for (const char* name : {"daemon", "engine", "control", "peer", "fabric"}) {
    if (spdlog::get(name)) continue;
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_level(spdlog::level::from_str(level));
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    spdlog::register_logger(logger);
  }
}

Result<std::unique_ptr<Engine>> MakeEngine(const Options& options, bool peering) {
  auto log = spdlog::get("daemon");
  std::unique_ptr<driver::Device> link_device;
  VerbsOpened verbs;
  verbs.reason = "peering is off (no fabric_key)";
  if (peering) {
    MCDMA_ASSIGN_OR_RETURN(link_device, CreateLinkDevice(options));
    verbs = OpenVerbs(options);
    for (const Engine::RdmaPort& p : verbs.ports) {
      const LocalVerbsInfo& i = p.info;
      log->info("verbs: rail {}: {} port {} GID {} (index {}), profile {} (device is {}), MTU {}",
                i.rail, i.device, i.port, i.gid, i.gid_index, i.profile, i.detected_profile,
                i.active_mtu);
    }
    if (verbs.ports.empty()) {
      log->info("verbs: not available: {}; links use tcp", verbs.reason);
    } else if (!verbs.reason.empty()) {
      log->warn("verbs: left out: {}", verbs.reason);
    }
  }
  MCDMA_ASSIGN_OR_RETURN(auto device, driver::loop::CreateLoopDevice());
  return std::make_unique<Engine>(
      options, Engine::Devices{std::move(device), std::move(link_device), nullptr},
      std::move(verbs.ports), verbs.reason);
}

Daemon::Daemon(const Options& options) : options_(options) {
  SetUpLogging(options_.log_level);
  log_ = spdlog::get("daemon");
}

Result<std::unique_ptr<Daemon>> Daemon::Start(const Options& options) {
  std::unique_ptr<Daemon> daemon(new Daemon(options));
  // On failure the destructor stops what StartAll started.
  MCDMA_RETURN_IF_ERROR(daemon->StartAll());
  return daemon;
}

Status Daemon::StartAll() {
  // Peering: the key first, so a bad key file stops the daemon before it
  // serves anything.
  std::shared_ptr<const FabricKey> key;
  if (!options_.fabric_key.empty()) {
    auto loaded = LoadFabricKey(options_.fabric_key);
    if (!loaded.ok())
      return Status(loaded.status().code(), "fabric_key: " + loaded.status().message());
    key = std::make_shared<const FabricKey>(std::move(loaded).value());
  }
  // The budgets that depend on this machine (open files, /dev/shm) are
  // fixed before anything uses them.
  MachineFacts facts;
  MCDMA_ASSIGN_OR_RETURN(facts.open_file_limit, platform::RaiseOpenFileLimit());
  facts.shm_capacity = platform::SharedMemoryCapacity();
  MCDMA_RETURN_IF_ERROR(ResolveBudgets(options_, facts));
  MCDMA_ASSIGN_OR_RETURN(engine_, MakeEngine(options_, key != nullptr));
  MCDMA_ASSIGN_OR_RETURN(auto socket, SocketPath::Prepare(options_.socket, options_.socket_group));
  socket_.emplace(std::move(socket));
  for (const std::string& name : socket_->removed_segments()) {
    log_->info("removed segment {}, left by an earlier instance on this socket", name);
  }
  for (const std::string& why : socket_->unremovable_segments()) {
    log_->warn("cannot remove a segment an earlier instance on this socket left: {}", why);
  }
  MCDMA_ASSIGN_OR_RETURN(
      control_listener_,
      Listener::ListenUnix("control", options_.socket,
                           {options_.max_connections, options_.max_connections_per_user}));
  if (Status st = socket_->SetModeFromDirectory(); !st.ok()) {
    spdlog::get("daemon")->warn("control socket: {}", st.ToString());
  }
  MCDMA_RETURN_IF_ERROR(engine_->Start());
  if (key) {
    MCDMA_ASSIGN_OR_RETURN(peers_, PeerPlane::Start(options_, *engine_, key));
  }

  LinkManager* links = peers_ ? &peers_->links() : nullptr;
  control_ = std::make_unique<ControlService>(*engine_, links, control_listener_.get());
  admin_ = std::make_unique<AdminService>(*engine_, links);
  admin_->SetListeners(control_listener_.get(), peers_ ? &peers_->listener() : nullptr);
  if (peers_) admin_->SetPeerService(&peers_->service());
  if (peers_) admin_->SetMembership(peers_->membership());
  grpc::ServerBuilder builder;
  builder.RegisterService(control_.get());
  builder.RegisterService(admin_.get());
  builder.SetMaxReceiveMessageSize(4 << 20);
  server_.reset(builder.BuildAndStart().release());
  if (!server_) return Status(Code::kSystem, "cannot serve on " + options_.socket);
  // Connections reach the server only through the listener, which bounds
  // them and keeps accepting when descriptors run out (listener.hpp).
  control_listener_->Start(
      [server = server_.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  if (!options_.metrics_listen.empty()) {
    MCDMA_ASSIGN_OR_RETURN(metrics_, MetricsEndpoint::Start(options_.metrics_listen, *admin_));
    log_->info("metrics on http://{}/metrics", metrics_->address());
  }
  log_->info("mcdma-rpcd {} serving on {} as host '{}' (transports: loop{})", MCDMA_VERSION_TEXT,
             options_.socket, options_.host_id,
             peers_ ? std::string(engine_->has_verbs() ? ", verbs" : "") + ", tcp; peers on " +
                          peers_->listen_address()
                    : "; peering off: no fabric_key");
  platform::NotifyServiceManager("READY=1\nSTATUS=serving");
  watchdog_.emplace([engine = engine_.get()] { return engine->rounds(); });
  serving_ = true;
  return Status::Ok();
}

void Daemon::Drain(std::string_view why) {
  if (!serving_ || drained_) return;
  drained_ = true;
  log_->info("{}; draining (up to {} ms)", why, options_.drain_timeout_ms);
  platform::NotifyServiceManager("STOPPING=1\nSTATUS=draining");
  Engine& engine = *engine_;
  (void)engine.Run([&] {
    engine.BeginDrain();
    return 0;
  });
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.drain_timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto idle = engine.Run([&] { return engine.Idle(); });
    if (!idle || *idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Peers hear Goodbye (their apps' operations on us end PEER_GONE at once)
  // before the sessions close.
  if (peers_) peers_->Stop();
  (void)engine.Run([&] {
    engine.CloseAllSessions(Code::kUnavailable);
    return 0;
  });
}

std::string Daemon::peer_address() const { return peers_ ? peers_->listen_address() : ""; }

// Sessions are closed by now; what is left are idle connections and admin
// calls, which need no long grace.
void Daemon::StopServer::operator()(grpc::Server* server) const {
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  delete server;
}

Daemon::~Daemon() {
  Drain("stopping");
  // No connection may be handed to the server once it is shutting down.
  if (control_listener_) control_listener_->Stop();
  // The members stop in reverse order; see daemon.hpp.
}

}  // namespace mcdma::daemon
