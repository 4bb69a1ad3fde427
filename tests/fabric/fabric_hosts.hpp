// The fabric fixture: N hosts in network namespaces (tests/netns/hosts.sh),
// each with an mcdma-rpcd that finds the others through a real etcd, and
// cables (veth pairs, each a /30 of its own) between the pairs a test
// names: a line, a ring, a partial mesh.
//
// Every host also sits on one bridge (the management network): the store
// listens there, in the bridge's namespace, at 10.240.N.254, as an etcd
// on a management network does. Daemons publish only their cables'
// addresses (--fabric-interfaces "c-*"), so links run over cables alone.
//
// Lifetime: SetUp makes a temporary directory and a fabric key; MakeFabric
// the namespaces, cables and the store; StartDaemon each daemon. TearDown
// SIGTERMs the daemons (each must exit 0), stops the store, removes the
// namespaces, and on failure prints the daemons' logs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/daemons.hpp"
#include "harness/etcd_server.hpp"
#include "harness/hosts.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::ftest {

using harness::Millis;

class FabricHosts : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // `count` hosts ("host-a", ...) cabled as `cables` ("ab", "bc", ...),
  // and the store. Fails the test (fatally) on any error.
  void MakeFabric(size_t count, const std::vector<std::string>& cables);
  // Starts host i's daemon with the fabric flags and `extra`.
  void StartDaemon(size_t i, std::vector<std::string> extra = {});
  void StartAll();
  // SIGKILLs host i's daemon.
  void KillDaemon(size_t i);

  Result<v1::FabricReply> Fabric(size_t i, std::string* raw = nullptr);
  Result<v1::LinksReply> Links(size_t i);
  // Polls `pred` every 50 ms until it holds or `timeout` passes.
  static bool WaitFor(const std::function<bool()>& pred, Millis timeout);
  // Whether host i's link to `peer` is up (as its mcdmactl links shows).
  bool LinkUp(size_t i, const std::string& peer);
  // Whether every cable's link is up at both ends and no other link
  // exists; `why` says what is not so.
  bool LinksAreTheCables(std::string* why);
  // The view of `host` in host i's fabric reply (nullptr if none).
  static const v1::FabricHostView* HostIn(const v1::FabricReply& f, const std::string& host);
  void Cable(const std::string& command, char x, char y);

  // Starts a test app (tests/integration/testapp.hpp's roles) on host i:
  // `role` with `--socket` of that host's daemon and `args`; its stderr
  // goes to the test's directory. Fails the test if it cannot start.
  harness::Child* App(size_t i, const std::string& role, std::vector<std::string> args);
  // The same with another program that takes `ROLE --socket S ARGS...`.
  harness::Child* Tool(size_t i, const std::string& path, const std::string& role,
                       std::vector<std::string> args);
  // Waits until host i's fabric lists a route to `host` of `hops` hosts
  // (the destination included).
  bool WaitRoute(size_t i, const std::string& host, size_t hops, Millis timeout);

  size_t index_of(const std::string& id) const;
  harness::DaemonHost& host(size_t i) { return hosts_[i]; }

  std::string dir_;
  std::string key_;
  std::unique_ptr<harness::Hosts> netns_;
  std::vector<harness::DaemonHost> hosts_;
  std::vector<std::pair<char, char>> cables_;
  std::unique_ptr<harness::EtcdServer> store_;
  std::string store_url_;
  uint32_t lease_ttl_ms_ = 6000;
  // Set (before MakeFabric): every cable is rate-limited to this (tc tbf,
  // e.g. "400mbit"); empty: not limited.
  std::string cable_rate_;
  // Set (before StartDaemon): the daemons read this fabric file instead of
  // the store.
  std::string fabric_file_;
  // The static fabric file for the cables made (each host's Peer service
  // on each of its cables' addresses, hosts.sh's numbering), with
  // [[cable]] tables when `cables`.
  std::string WriteFabricFile(bool cables);
  std::vector<std::unique_ptr<harness::Child>> apps_;
};

}  // namespace mcdma::ftest
