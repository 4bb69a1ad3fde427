#include "config/command_line.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <string>
#include <vector>

#include "config/option_table.hpp"
#include "mcdma_auth/fabric_key.hpp"

namespace mcdma::daemon {

void AddOptionFlags(CLI::App& app, Options& flags) {
  for (const OptionSpec& row : OptionTable()) {
    std::string help = std::string(row.help) + " (toml: " + std::string(row.key) + ")";
    std::visit(
        [&](auto member) {
          app.add_option(std::string(row.flag), flags.*member, help)->capture_default_str();
        },
        row.field);
  }
}

void ApplyGivenFlags(const CLI::App& app, const Options& flags, Options& options) {
  for (const OptionSpec& row : OptionTable()) {
    if (app.count(std::string(row.flag)) > 0) CopyOption(row, flags, options);
  }
}

Result<PeerConfig> ParsePeerFlag(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos) {
    return Status(Code::kInvalid, "--peer " + text + ": expected NAME=HOST[:PORT][,TRANSPORT]");
  }
  PeerConfig peer;
  peer.name = text.substr(0, eq);
  peer.address = text.substr(eq + 1);
  if (auto comma = peer.address.find(','); comma != std::string::npos) {
    peer.transport = peer.address.substr(comma + 1);
    peer.address.resize(comma);
  }
  return peer;
}

Result<RailConfig> ParseRailFlag(const std::string& text) {
  unsigned char bytes[16];
  if (inet_pton(AF_INET, text.c_str(), bytes) != 1 &&
      inet_pton(AF_INET6, text.c_str(), bytes) != 1) {
    return Status(Code::kInvalid, "--rail " + text +
                                      ": expected ADDRESS, an IPv4 or IPv6 address of a local "
                                      "interface (no port, no host name)");
  }
  RailConfig rail;
  rail.address = text;
  return rail;
}

std::variant<CommandLine, int> ParseCommandLine(int argc, const char* const* argv) {
  CLI::App app{"mcdma-rpcd: the mcdma link daemon (one per host)"};
  std::string config;
  app.add_option("-c,--config", config, "TOML configuration file (flags override it)");
  Options flags;
  AddOptionFlags(app, flags);
  std::vector<std::string> peer_flags;
  app.add_option("--peer", peer_flags,
                 "a peer to link to: NAME=HOST[:PORT][,TRANSPORT] (repeatable; adds to the "
                 "config file's [[peer]] list)");
  std::vector<std::string> rail_flags;
  app.add_option("--rail", rail_flags,
                 "a tcp rail of this host: ADDRESS, an IP address of a local interface that "
                 "carries data connections of links besides their own (repeatable; adds to the "
                 "config file's [[rail]] list; named tcp:ADDRESS)");
  std::vector<std::string> rdma_flags;
  app.add_option("--rdma", rdma_flags,
                 "an RDMA device port to open, each a verbs rail: "
                 "device=NAME[,port=N][,profile=P][,interface=IF][,gid-index=N] (repeatable; adds "
                 "to the config file's [[rdma]] list)");
  std::vector<std::string> reserve_flags;
  app.add_option("--reserve", reserve_flags,
                 "reserve export and service names starting with PREFIX for the sessions of "
                 "UID: PREFIX=UID (repeatable; adds to the config file's [[reserve]] list)");
  CommandLine command;
  app.add_flag("--check", command.check_only,
               "validate the configuration and flags, print the result, exit");
  app.set_version_flag("--version", MCDMA_VERSION_TEXT);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return e.get_exit_code() == 0 ? 0 : (rc == 0 ? 0 : 2);
  }

  Options& options = command.options;
  if (!config.empty()) {
    if (Status st = LoadTomlFile(config, options); !st.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: config: %s\n", st.message().c_str());
      return 2;
    }
  }
  ApplyGivenFlags(app, flags, options);
  for (const std::string& text : peer_flags) {
    auto peer = ParsePeerFlag(text);
    if (!peer.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: %s\n", peer.status().message().c_str());
      return 2;
    }
    options.peers.push_back(std::move(peer).value());
  }
  for (const std::string& text : rail_flags) {
    auto rail = ParseRailFlag(text);
    if (!rail.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: %s\n", rail.status().message().c_str());
      return 2;
    }
    options.rails.push_back(std::move(rail).value());
  }
  for (const std::string& text : rdma_flags) {
    auto r = ParseRdmaFlag(text);
    if (!r.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: %s\n", r.status().message().c_str());
      return 2;
    }
    options.rdma.push_back(std::move(r).value());
  }
  for (const std::string& text : reserve_flags) {
    auto r = ParseReservation(text);
    if (!r.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: %s\n", r.status().message().c_str());
      return 2;
    }
    options.reservations.push_back(std::move(r).value());
  }
  if (Status st = Validate(options); !st.ok()) {
    std::fprintf(stderr, "mcdma-rpcd: %s\n", st.message().c_str());
    return 2;
  }
  return command;
}

int PrintCheck(const Options& options) {
  if (!options.fabric_key.empty()) {
    auto key = LoadFabricKey(options.fabric_key);
    if (!key.ok()) {
      std::fprintf(stderr, "mcdma-rpcd: fabric_key: %s\n", key.status().message().c_str());
      return 2;
    }
  }
  std::string peers =
      options.fabric_key.empty()
          ? "off (no fabric_key)"
          : std::to_string(options.peers.size()) + " configured, listening on " + options.listen;
  std::printf("configuration OK: socket %s, host id '%s', peers: %s\n", options.socket.c_str(),
              options.host_id.c_str(), peers.c_str());
  return 0;
}

}  // namespace mcdma::daemon
