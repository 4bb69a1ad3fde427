// mcdma-rpcd: parse, load, validate, run.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "mcdma_internal/fabric_key.hpp"
#include "options.hpp"

namespace {
int Main(int argc, char** argv) {
  using mcdma::daemon::Options;
  Options defaults;
  CLI::App app{"mcdma-rpcd: the mcdma link daemon (one per host)"};
  app.option_defaults()->always_capture_default();
  std::string config;
  Options flags = defaults;
  app.add_option("-c,--config", config, "TOML configuration file (flags override it)");
  app.add_option("--socket", flags.socket,
                 "control socket (default: $MCDMA_SOCKET, $XDG_RUNTIME_DIR/mcdma/rpcd.sock, "
                 "/run/mcdma/rpcd.sock; /var/run/mcdma/rpcd.sock on macOS)");
  app.add_option("--socket-group", flags.socket_group,
                 "group that may connect: the socket's directory becomes 0750 of this group "
                 "(default: leave it as found)");
  app.add_option("--host-id", flags.host_id, "host id shown to peers (default: hostname)");
  app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error|critical|off");
  app.add_option("--spin-budget-us", flags.spin_budget_us,
                 "engine spin before sleeping, microseconds");
  app.add_option("--arena-bytes", flags.arena_bytes, "default mailbox arena size per session");
  app.add_option("--max-buffer-bytes", flags.max_buffer_bytes,
                 "largest buffer an app may allocate");
  app.add_option("--default-timeout-ms", flags.default_timeout_ms,
                 "deadline for operations that set none");
  app.add_option("--drain-timeout-ms", flags.drain_timeout_ms,
                 "on SIGTERM, wait this long for in-flight work");
  app.add_option("--fabric-key", flags.fabric_key,
                 "fabric key file (mode 0600; `mcdmactl fabric-key new` writes one); "
                 "enables the peer service");
  app.add_option("--listen", flags.listen, "peer service address, host:port");
  app.add_option("--data-listen", flags.data_listen,
                 "tcp data-link listener, host:port (default: listen's host, any port)");
  std::vector<std::string> peer_flags;
  app.add_option("--peer", peer_flags,
                 "a peer to link to: NAME=HOST[:PORT][,TRANSPORT] (repeatable; adds to the "
                 "config file's [[peer]] list)");
  app.add_option("--heartbeat-ms", flags.heartbeat_ms, "link heartbeat interval");
  app.add_option("--link-timeout-ms", flags.link_timeout_ms,
                 "heartbeat silence that takes a link down");
  app.add_option("--reconnect-max-ms", flags.reconnect_max_ms, "longest reconnect backoff");
  app.add_option("--verbs-device", flags.verbs_device,
                 "RDMA device for verbs links (default: the first with an ACTIVE port)");
  app.add_option("--verbs-interface", flags.verbs_interface,
                 "interface peers are reached on (its RoCE v2 GID is used)");
  app.add_option("--verbs-profile", flags.verbs_profile,
                 "device profile: linux-rc, mcdma-cx5, apple-tb5 (default: detected)");
  bool check_only = false;
  app.add_flag("--check", check_only,
               "validate the configuration and flags, print the result, exit");
  app.set_version_flag("--version", MCDMA_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return e.get_exit_code() == 0 ? 0 : (rc == 0 ? 0 : 2);
  }

  Options options = defaults;
  if (!config.empty()) {
    mcdma::Status st = mcdma::daemon::LoadTomlFile(config, options);
    if (!st.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: config: %s\n", st.message().c_str());
      return 2;
    }
  }
  // Flags given on the command line override the file.
  auto given = [&](const char* name) { return app.count(name) > 0; };
  if (given("--socket")) options.socket = flags.socket;
  if (given("--socket-group")) options.socket_group = flags.socket_group;
  if (given("--host-id")) options.host_id = flags.host_id;
  if (given("--log-level")) options.log_level = flags.log_level;
  if (given("--spin-budget-us")) options.spin_budget_us = flags.spin_budget_us;
  if (given("--arena-bytes")) options.arena_bytes = flags.arena_bytes;
  if (given("--max-buffer-bytes")) options.max_buffer_bytes = flags.max_buffer_bytes;
  if (given("--default-timeout-ms")) options.default_timeout_ms = flags.default_timeout_ms;
  if (given("--drain-timeout-ms")) options.drain_timeout_ms = flags.drain_timeout_ms;
  if (given("--fabric-key")) options.fabric_key = flags.fabric_key;
  if (given("--listen")) options.listen = flags.listen;
  if (given("--data-listen")) options.data_listen = flags.data_listen;
  if (given("--heartbeat-ms")) options.heartbeat_ms = flags.heartbeat_ms;
  if (given("--link-timeout-ms")) options.link_timeout_ms = flags.link_timeout_ms;
  if (given("--reconnect-max-ms")) options.reconnect_max_ms = flags.reconnect_max_ms;
  if (given("--verbs-device")) options.verbs_device = flags.verbs_device;
  if (given("--verbs-interface")) options.verbs_interface = flags.verbs_interface;
  if (given("--verbs-profile")) options.verbs_profile = flags.verbs_profile;
  for (const std::string& text : peer_flags) {
    mcdma::daemon::PeerConfig peer;
    auto eq = text.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "mcdma-rpcd: --peer %s: expected NAME=HOST[:PORT][,TRANSPORT]\n",
                   text.c_str());
      return 2;
    }
    peer.name = text.substr(0, eq);
    peer.address = text.substr(eq + 1);
    if (auto comma = peer.address.find(','); comma != std::string::npos) {
      peer.transport = peer.address.substr(comma + 1);
      peer.address.resize(comma);
    }
    options.peers.push_back(std::move(peer));
  }
  if (mcdma::Status st = mcdma::daemon::Validate(options); !st.ok()) {
    std::fprintf(stderr, "mcdma-rpcd: %s\n", st.message().c_str());
    return 2;
  }

  if (check_only && !options.fabric_key.empty()) {
    auto key = mcdma::LoadFabricKey(options.fabric_key);
    if (!key.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: fabric_key: %s\n", key.status().message().c_str());
      return 2;
    }
  }
  if (check_only) {
    std::printf("configuration OK: socket %s, host id '%s', peers: %s\n", options.socket.c_str(),
                options.host_id.c_str(),
                options.fabric_key.empty() ? "off (no fabric_key)"
                                           : (std::to_string(options.peers.size()) +
                                              " configured, listening on " + options.listen)
                                                 .c_str());
    return 0;
  }

  // Every thread inherits this mask; RunDaemon waits for the signals.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  mcdma::daemon::SetUpLogging(options.log_level);
  mcdma::Status st = mcdma::daemon::RunDaemon(options);
  if (!st.ok()) {
    spdlog::get("daemon")->critical("{}", st.ToString());
    return 1;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  // Nothing below is expected to throw; if a library does, say so and fail
  // instead of terminating without a word.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcdma-rpcd: fatal: %s\n", e.what());
    return 1;
  }
}
