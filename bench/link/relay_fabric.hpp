// The relay mode's fabric (link_relay.hpp): four hosts a, b, c, d in
// network namespaces (`hosts.sh up PREFIX 4`: all on one bridge, the
// management network, which carries nothing here) cabled as a line a-b,
// b-c, c-d (`hosts.sh cable PREFIX X Y [RATE]`: a veth pair, a /30 each,
// tc tbf on both ends), and an mcdma-rpcd on each host that finds the
// others in one static fabric file (`--fabric-file`: every host's Peer
// service on its cables' addresses, and the three [[cable]] tables) and
// links over the cables only (`--fabric-interfaces "c-*"`). Host a's
// daemon then links to b and reaches c and d through b (and c): the
// daemons route by themselves.
//
// Ownership: a RelayFabric owns the namespaces (Hosts) and the four daemon
// processes; destruction stops the daemons (SIGTERM, 5 s to drain, then
// SIGKILL), then removes the namespaces. Logs go to rpcd-X.log in the log
// directory given (else the run's temp dir).
//
// Threading: the orchestrator's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/daemons.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::bench {

// One cable between hosts[x] and hosts[x + 1] (the line's k-th, x = k).
struct RelayCable {
  std::string address[2];    // the left host's end, the right host's
  std::string interface[2];  // "c-b" in the left host, "c-a" in the right
  std::string label;         // "a-b"
};

// What a daemon's `mcdmactl fabric --json` says it relayed for others.
struct RelayCounters {
  bool read = false;
  uint64_t forwarded = 0;
  uint64_t forwarded_bytes = 0;
  uint64_t dropped = 0;  // every reason
};

struct RelayFabricConfig {
  std::string hosts_script;
  std::string rate;  // tc rate of every cable end; "" not limited
  std::string daemon_path;
  std::string mcdmactl_path;
  std::string log_level = "warn";
  std::vector<std::string> daemon_args;
  std::string log_dir;  // "" the run's temp dir
};

class RelayFabric {
 public:
  static constexpr size_t kHosts = 4;

  // The namespaces and cables; no daemon yet.
  static Result<std::unique_ptr<RelayFabric>> Make(const RelayFabricConfig& config,
                                                   const harness::TempDir& dir);
  ~RelayFabric();
  RelayFabric(const RelayFabric&) = delete;
  RelayFabric& operator=(const RelayFabric&) = delete;

  // The fabric file and a key, then the four daemons (b, c, d, then a).
  Status StartDaemons();
  // Waits until every host's `mcdmactl fabric --json` lists a route to
  // every other host of |i - j| hops and host a's link to b is up; the
  // seconds it took, or why not (each host's view).
  Result<double> WaitForRoutes(harness::Millis limit);

  const harness::Hosts& hosts() const { return *hosts_; }
  const harness::DaemonHost& daemon(size_t i) const { return daemons_[i]; }
  const std::vector<RelayCable>& cables() const { return cables_; }
  const std::string& fabric_file() const { return fabric_file_; }
  // "host-b direct; host-c via host-b; host-d via host-b, host-c" from
  // host a's last fabric reply.
  const std::string& routes_note() const { return routes_note_; }

  Result<v1::FabricReply> Fabric(size_t i) const;
  // Host i's relay counters now (read = false when they cannot be read).
  RelayCounters Relayed(size_t i) const;
  // Bytes sent so far on every cable, per direction: {a>b, b>a, b>c, c>b,
  // c>d, d>c}; empty when the counters cannot be read.
  std::vector<uint64_t> CableTx() const;
  // "" while every daemon runs; else which ended, and how.
  std::string Exited();
  // The last `lines` lines of every daemon's log, prefixed with its host.
  std::string LogTails(int lines) const;

 private:
  RelayFabric() = default;
  std::string DescribeRoutes(const v1::FabricReply& f) const;

  RelayFabricConfig config_;
  std::string dir_;
  std::unique_ptr<harness::Hosts> hosts_;  // outlives the daemons
  std::vector<RelayCable> cables_;
  std::vector<harness::DaemonHost> daemons_;
  std::string fabric_file_;
  std::string routes_note_;
};

}  // namespace mcdma::bench
