#include "doctor/cmd.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "admin_client.hpp"
#include "cli.hpp"
#include "doctor/darwin_gather.hpp"
#include "doctor/devices.hpp"
#include "doctor/report.hpp"
#include "mcdma/client.hpp"
#include "mcdma_auth/fabric_key.hpp"

namespace mcdma::tools {
namespace {

using doctor::DoctorInputs;

// The config as the daemon would read it. `socket` gets the file's own
// `socket` key (empty when unset, or when the file is unusable).
doctor::ConfigInput ReadConfig(const std::string& flag, std::string& socket) {
  doctor::ConfigInput config;
  std::error_code ec;
  config.path = flag;
  if (config.path.empty() && std::filesystem::exists(DoctorDefaultConfig(), ec)) {
    config.path = DoctorDefaultConfig();
  }
  daemon::Options options;
  if (!config.path.empty()) {
    if (!std::filesystem::exists(config.path, ec)) {
      config.status = Status(Code::kNotFound, config.path + ": no such file");
    } else {
      config.status = daemon::LoadTomlFile(config.path, options);
    }
  }
  socket = options.socket;
  if (config.status.ok()) config.status = daemon::Validate(options);
  if (!config.status.ok()) {
    socket.clear();
    options = daemon::Options();
    (void)daemon::Validate(options);  // defaults always validate
  }
  config.options = std::move(options);
  return config;
}

doctor::MemlockInput ReadMemlock() {
  doctor::MemlockInput m;
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
    m.status =
        Status(Code::kSystem, std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno) +
                                  " (errno " + std::to_string(errno) + ")");
    return m;
  }
  m.infinite = limit.rlim_cur == RLIM_INFINITY;
  m.soft_bytes = m.infinite ? 0 : static_cast<uint64_t>(limit.rlim_cur);
  m.hard_infinite = limit.rlim_max == RLIM_INFINITY;
  m.hard_bytes = m.hard_infinite ? 0 : static_cast<uint64_t>(limit.rlim_max);
  return m;
}

doctor::FabricKeyInput ReadFabricKey(const std::string& path) {
  doctor::FabricKeyInput key;
  if (path.empty()) return key;
  auto loaded = LoadFabricKey(path);
  if (!loaded.ok()) {
    key.status = loaded.status();
  } else {
    key.fingerprint = loaded->Fingerprint();
  }
  return key;
}

doctor::DaemonInput AskDaemon(const std::string& socket, std::chrono::milliseconds timeout) {
  doctor::DaemonInput d;
  d.socket = socket;
  AdminClient client(socket, timeout);
  auto status = client.GetStatus();
  if (!status.ok()) {
    d.status = status.status();
    return d;
  }
  d.reply = std::move(status).value();
  auto links = client.ListLinks();
  if (links.ok()) {
    d.links_status = Status::Ok();
    d.links = std::move(links).value();
  } else {
    d.links_status = links.status();
  }
  auto fabric = client.Fabric();
  if (fabric.ok()) {
    d.fabric_status = Status::Ok();
    d.fabric = std::move(fabric).value();
  } else {
    d.fabric_status = fabric.status();
  }
  return d;
}

}  // namespace

DoctorInputs GatherDoctorInputs(const DoctorFlags& flags) {
  DoctorInputs in;
  in.host_os = platform::kOs;
  std::string config_socket;
  in.config = ReadConfig(flags.config, config_socket);
  std::string dump = flags.device_dump;
  if (dump.empty()) {
    const char* env = std::getenv("MCDMA_DOCTOR_DEVICE_DUMP");
    if (env != nullptr) dump = env;
  }
  in.devices = dump.empty()
                   ? doctor::ListHostDevices(static_cast<uint8_t>(in.config.options.verbs_port))
                   : doctor::ReadDeviceDump(dump);
  in.memlock = ReadMemlock();
  // The macOS commands only exist on a Mac; elsewhere their checks do not run.
  if (doctor::kHostIsMacOS) in.darwin = doctor::GatherDarwinInputs();
  in.fabric_key = ReadFabricKey(in.config.options.fabric_key);
  const std::string socket = !flags.socket.empty()    ? flags.socket
                             : !config_socket.empty() ? config_socket
                                                      : DefaultClientSocketPath();
  in.daemon = AskDaemon(socket, flags.timeout);
  return in;
}

int DoctorCommand(const DoctorFlags& flags, std::ostream& out, std::ostream& err) {
  const auto results = doctor::RunChecks(GatherDoctorInputs(flags));
  if (flags.json) {
    out << doctor::RenderJson(results) << '\n';
  } else {
    doctor::RenderText(results, out);
  }
  out.flush();
  if (!out) {
    err << "mcdmactl: doctor: cannot write output\n";
    return kExitFailure;
  }
  return doctor::Healthy(results) ? kExitOk : kExitFailure;
}

void AddDoctorCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                      LocalCommand& chosen) {
  CLI::App* sub = app.add_subcommand(
      "doctor",
      "Check this host's setup (config, RDMA device, port, GID, profile, locked memory, fabric "
      "key, daemon, fabric store, links) and say how to fix what is wrong; exit 1 if any check "
      "fails");
  auto flags = std::make_shared<DoctorFlags>();
  sub->add_flag("--json", flags->json,
                "Print {\"healthy\", \"checks\": [{\"id\", \"verdict\", \"summary\", \"detail\", "
                "\"fix\"}]} as one JSON object");
  sub->add_option("--config", flags->config,
                  std::string("The daemon's TOML config; default ") + DoctorDefaultConfig() +
                      " if it exists, else built-in defaults")
      ->type_name("FILE");
  sub->add_option("--socket", flags->socket,
                  "Daemon control socket; default: the config's socket, else as for every "
                  "command (see mcdmactl --help)")
      ->type_name("PATH");
  sub->add_option("--device-dump", flags->device_dump,
                  "Read RDMA devices from a recorded dump instead of libibverbs (tests)")
      ->group("");
  CLI::Option* global_socket = app.get_option("--socket");
  sub->callback([&chosen, flags, &socket, &timeout_ms, global_socket] {
    chosen = [flags, &socket, &timeout_ms, global_socket](std::ostream& out, std::ostream& err) {
      DoctorFlags resolved = *flags;
      if (resolved.socket.empty() && global_socket->count() > 0) resolved.socket = socket;
      resolved.timeout = std::chrono::milliseconds(timeout_ms);
      return DoctorCommand(resolved, out, err);
    };
  });
}

}  // namespace mcdma::tools
