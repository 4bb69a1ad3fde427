#include "daemon.hpp"

#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "admin_service.hpp"
#include "control_service.hpp"
#include "driver/loop/loop_transport.hpp"
#include "engine.hpp"
#include "mcdma_internal/fabric_key.hpp"
#include "mcdma_internal/sys.hpp"
#include "peer/peer_plane.hpp"
#include "platform/names.hpp"
#include "platform/service_manager.hpp"
#include "platform/socket.hpp"
#include "verbs_support.hpp"

namespace mcdma::daemon {
namespace {

// True if something accepts connections on the Unix socket at `path`.
bool SocketAnswers(const std::string& path) {
  auto fd = platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0, platform::Blocking::kBlocking);
  if (!fd.ok()) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return connect(fd->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// Gives the socket's directory to `group` (mode 0750), so that its members
// may connect; Validate checked that the group exists.
Status GiveSocketDirectoryTo(const std::string& dir, const std::string& group) {
  const struct group* gr = getgrnam(group.c_str());
  if (gr == nullptr) return Status(Code::kInvalid, "socket_group: no group '" + group + "'");
  if (chown(dir.c_str(), static_cast<uid_t>(-1), gr->gr_gid) != 0) {
    return SysError("chown", errno, "socket directory " + dir + " to group " + group);
  }
  if (chmod(dir.c_str(), 0750) != 0) return SysError("chmod", errno, "socket directory " + dir);
  return Status::Ok();
}

Status PrepareSocketPath(const std::string& path, const std::string& group) {
  MCDMA_RETURN_IF_ERROR(platform::CheckUnixSocketPath(path));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return Status(Code::kSystem,
                    "cannot create socket directory " + dir.string() + ": " + ec.message());
    // Only the owner (a user instance) or the owner and its group (the
    // service's `mcdma` group) may reach the socket.
    chmod(dir.c_str(), geteuid() == 0 ? 0750 : 0700);
  }
  if (!group.empty()) {
    MCDMA_RETURN_IF_ERROR(GiveSocketDirectoryTo(dir.empty() ? "." : dir.string(), group));
  }
  if (std::filesystem::exists(path, ec)) {
    if (SocketAnswers(path)) {
      return Status(Code::kAlreadyExists, "another mcdma-rpcd is already listening on " + path);
    }
    if (unlink(path.c_str()) != 0) return SysError("unlink", errno, "stale socket " + path);
  }
  return Status::Ok();
}

int WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace

void SetUpLogging(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  for (const char* name : {"daemon", "engine", "control", "peer"}) {
    if (spdlog::get(name)) continue;
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_level(spdlog::level::from_str(level));
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    spdlog::register_logger(logger);
  }
}

Status RunDaemon(const Options& options) {
  auto log = spdlog::get("daemon");
  // Peering: the key first, so a bad key file stops the daemon before it
  // serves anything.
  std::shared_ptr<const FabricKey> key;
  std::unique_ptr<driver::Device> link_device;
  VerbsOpened verbs;
  verbs.info.reason = "peering is off (no fabric_key)";
  if (!options.fabric_key.empty()) {
    auto loaded = LoadFabricKey(options.fabric_key);
    if (!loaded.ok())
      return Status(loaded.status().code(), "fabric_key: " + loaded.status().message());
    key = std::make_shared<const FabricKey>(std::move(loaded).value());
    MCDMA_ASSIGN_OR_RETURN(link_device, CreateLinkDevice(options));
    verbs = OpenVerbs(options);
    if (verbs.device) {
      log->info("verbs: {} port {} GID {} (index {}), profile {} (device is {}), MTU {}",
                verbs.info.device, verbs.info.port, verbs.info.gid, verbs.info.gid_index,
                verbs.info.profile, verbs.info.detected_profile, verbs.info.active_mtu);
    } else {
      log->info("verbs: not available: {}; links use tcp", verbs.info.reason);
    }
  }
  MCDMA_RETURN_IF_ERROR(PrepareSocketPath(options.socket, options.socket_group));
  MCDMA_ASSIGN_OR_RETURN(auto device, driver::loop::CreateLoopDevice());
  Engine engine(options, {std::move(device), std::move(link_device), std::move(verbs.device)},
                verbs.info);
  MCDMA_RETURN_IF_ERROR(engine.Start());

  std::unique_ptr<PeerPlane> peers;
  if (key) {
    auto plane = PeerPlane::Start(options, engine, key);
    if (!plane.ok()) {
      engine.Stop();
      return plane.status();
    }
    peers = std::move(plane).value();
  }
  LinkManager* links = peers ? &peers->links() : nullptr;
  ControlService control(engine, links);
  AdminService admin(engine, links);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + options.socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&control);
  builder.RegisterService(&admin);
  builder.SetMaxReceiveMessageSize(4 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    engine.Stop();
    return Status(Code::kSystem, "cannot listen on " + options.socket);
  }
  // The socket's directory decides who may connect: a group-accessible
  // directory (the service's RuntimeDirectoryMode=0750, group mcdma) gets a
  // group-accessible socket; a private one (a user instance) a private socket.
  struct stat dir_st {};
  std::string dir = std::filesystem::path(options.socket).parent_path().string();
  bool group = stat(dir.empty() ? "." : dir.c_str(), &dir_st) == 0 && (dir_st.st_mode & 0070) != 0;
  chmod(options.socket.c_str(), group ? 0660 : 0600);
  log->info("mcdma-rpcd {} serving on {} as host '{}' (transports: loop{})", MCDMA_VERSION,
            options.socket, options.host_id,
            peers ? std::string(engine.has_verbs() ? ", verbs" : "") + ", tcp; peers on " +
                        peers->listen_address()
                  : "; peering off: no fabric_key");
  platform::NotifyServiceManager("READY=1\nSTATUS=serving");

  std::atomic<bool> watchdog_stop{false};
  std::thread watchdog;
  if (auto interval = platform::WatchdogInterval()) {
    watchdog = std::thread([&, interval = *interval] {
      uint64_t last = engine.rounds();
      while (!watchdog_stop.load()) {
        std::this_thread::sleep_for(interval / 2);
        uint64_t now = engine.rounds();
        // Only a live engine loop earns a ping; a stuck one gets restarted.
        if (now != last) platform::NotifyServiceManager("WATCHDOG=1");
        last = now;
      }
    });
  }

  int sig = WaitForSignal();
  log->info("received {}; draining (up to {} ms)", strsignal(sig), options.drain_timeout_ms);
  platform::NotifyServiceManager("STOPPING=1\nSTATUS=draining");
  (void)engine.Run([&] {
    engine.BeginDrain();
    return 0;
  });
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.drain_timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto idle = engine.Run([&] { return engine.Idle(); });
    if (!idle || *idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Peers hear Goodbye (their apps' operations on us end PEER_GONE at once)
  // before the sessions close.
  if (peers) peers->Stop();
  (void)engine.Run([&] {
    engine.CloseAllSessions(Code::kUnavailable);
    return 0;
  });
  // Sessions are closed by now; what is left are idle connections and admin
  // calls, which need no long grace.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  engine.Stop();
  watchdog_stop.store(true);
  if (watchdog.joinable()) watchdog.join();
  unlink(options.socket.c_str());
  log->info("stopped");
  return Status::Ok();
}

}  // namespace mcdma::daemon
