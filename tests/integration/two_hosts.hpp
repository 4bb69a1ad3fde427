// The two-host fixture: two real mcdma-rpcd daemons ("host-a" and "host-b")
// sharing a fabric key, host-a configured with `--peer host-b=...` and host-b
// accepting the incoming link, plus real client processes on either host.
//
// Two variants, so every test runs both ways (TEST_P with kHostVariants):
//   loopback  both daemons on 127.0.0.1, each on its own Unix socket, peer
//             port and data port (free ports found by binding port 0);
//   netns     two network namespaces joined by a veth pair
//             (tests/netns/hosts.sh up PREFIX, a fresh PREFIX per test); each
//             daemon and each app runs under `ip netns exec NS` and the
//             daemons listen on their 10.240.N.x addresses. Unix sockets and
//             /dev/shm are on the shared filesystem, so apps reach their own
//             host's daemon as usual. Skips, saying why, where `hosts.sh
//             check` exits 77 (not root).
//
//   verbs     the two daemons linked over the verbs transport on two Soft-RoCE
//             devices whose packets cross a veth pair: only inside the
//             Soft-RoCE VM (tests/verbs/run-vm-tests.sh), which sets
//             MCDMA_VERBS_HOSTS="rxe1:veth0:10.0.1.1,rxe2:veth1:10.0.1.2" and
//             MCDMA_VERBS_PROFILE (forced on both daemons; default
//             linux-rc). Elsewhere it skips, saying so. Sizes shrink there
//             (VerbsScale) because the VM emulates its CPUs.
//
// The hosts and their daemons are the harness's (harness/hosts.hpp,
// harness/daemons.hpp); this fixture adds the variants, gtest's failures
// and the testapp processes.
//
// Lifetime: SetUp makes a mkdtemp directory, a fabric key, the namespaces
// (netns), starts host-b then host-a and waits until `mcdmactl links
// --json` shows the link "up" on both sides (unless LinkAtSetUp() is false:
// then the test adjusts the hosts and calls StartDaemons itself). TearDown SIGKILLs every app,
// SIGTERMs both daemons (each must exit 0 within 15 s), always runs `hosts.sh down`, and on any
// failure prints both daemons' logs and every app's output.
//
// Threading: everything here belongs to the test body's thread.
#pragma once

#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"
#include "harness/daemons.hpp"
#include "harness/hosts.hpp"
#include "mcdma/client.hpp"
#include "mcdma/v1/admin.pb.h"
#include "test_util.hpp"

namespace mcdma::itest {

inline constexpr const char* kHostsScript = MCDMA_HOSTS_SH;

enum class HostVariant { kLoopback, kNetns, kVerbs };

// For INSTANTIATE_TEST_SUITE_P: every variant, named "loopback", "netns"
// and "verbs".
inline const auto kHostVariants =
    ::testing::Values(HostVariant::kLoopback, HostVariant::kNetns, HostVariant::kVerbs);
std::string HostVariantName(const ::testing::TestParamInfo<HostVariant>& info);
// How gtest prints the parameter ("loopback", "netns").
void PrintTo(HostVariant v, std::ostream* os);

// One simulated host: id, namespace, address, and its daemon's
// configuration (ports, socket, log, fabric key, --peer values, more
// flags) and process (`daemon`).
using Host = harness::DaemonHost;

// The fixture itself, for any parameter type: a subclass says which
// variant it runs (TwoHosts below: gtest's parameter; KillMatrix: netns).
class TwoHostsBase : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  virtual HostVariant variant() const = 0;

  // False: SetUp prepares both hosts but starts no daemon.
  virtual bool LinkAtSetUp() const { return true; }

  bool netns() const { return variant() == HostVariant::kNetns; }
  bool verbs() const { return variant() == HostVariant::kVerbs; }
  // The transport the link is expected to use.
  std::string transport() const { return verbs() ? "verbs" : "tcp"; }
  // The verbs profile forced in the verbs variant ("" otherwise).
  const std::string& profile() const { return profile_; }
  Host& a() { return a_; }
  Host& b() { return b_; }
  const std::string& dir() const { return dir_.path(); }

  // Starts host-b, then host-a, and waits (20 s) for the link to be "up" on
  // both; fails the test (fatally, in the caller's ASSERT_NO_FATAL_FAILURE)
  // otherwise.
  void StartDaemons();
  // Starts one daemon with its current configuration and waits (20 s) until
  // its control socket accepts. False (and a failure) otherwise.
  bool StartDaemon(Host& h);
  // SIGKILL, reaped, and forgotten (TearDown then expects nothing of it).
  void KillDaemon(Host& h);
  bool DaemonAlive(Host& h) { return h.daemon && h.daemon->Alive(); }
  // The mcdma-rpcd command line for `h` (wrapped in `ip netns exec`).
  std::vector<std::string> DaemonArgv(const Host& h) const;
  // A fresh fabric key file in the test directory.
  std::string NewFabricKey(const std::string& name);

  // ---- links ----
  // `mcdmactl --socket S links --json`, parsed; nullopt (with `error`) if the
  // command fails or prints something else.
  std::optional<v1::LinksReply> Links(Host& h, std::string* error = nullptr,
                                      std::string* raw = nullptr);
  // h's link to `peer` now; nullopt if h lists none.
  std::optional<v1::LinkInfo> LinkTo(Host& h, const std::string& peer);
  // Polls h's link to `peer` until `pred` holds; the last seen link (if any)
  // in `last`.
  bool WaitLink(Host& h, const std::string& peer,
                const std::function<bool(const v1::LinkInfo&)>& pred, Millis timeout,
                v1::LinkInfo* last = nullptr);
  // Both directions "up" (a's link to b and b's link to a).
  bool WaitLinked(Millis timeout, std::string* why = nullptr);

  // ---- apps ----
  // `mcdma_testapp ROLE --socket h.socket ARGS...` on host h (in h's
  // namespace); stderr to a log file. nullptr (and a failure) if it cannot
  // start.
  Child* StartApp(Host& h, const std::string& role, const std::vector<std::string>& args);
  // StartApp, then waits (20 s) for its READY line.
  Child* StartReady(Host& h, const std::string& role, const std::vector<std::string>& args);
  // An in-process client of h's daemon (Unix socket and shm only, so the
  // namespace does not matter). nullptr and a failure if it cannot connect.
  std::unique_ptr<Client> Connect(Host& h, const std::string& name);
  // mcdmactl --socket h.socket ARGS... (limit `timeout`).
  CommandResult Ctl(Host& h, const std::vector<std::string>& args, Millis timeout = Millis(15000));
  // tests/netns/hosts.sh CMD PREFIX (netns variant only).
  CommandResult HostsSh(const std::string& cmd);
  // The namespaces' PREFIX (netns variant; "" otherwise), for hosts.sh
  // commands that take more arguments (rails PREFIX COUNT RATE).
  std::string netns_prefix() const;

  // Both daemon logs (tails) and every app's output, for failure messages.
  std::string Describe() const;

 private:
  void PrepareLoopback();
  void PrepareNetns();
  void PrepareVerbs();
  // Takes the hosts' ids, namespaces and addresses into a_ and b_.
  void AdoptHosts(std::unique_ptr<harness::Hosts> hosts);

  TempDir dir_;
  std::unique_ptr<harness::Hosts> hosts_;  // netns: owns the namespaces
  std::string profile_;
  Host a_;
  Host b_;
  std::vector<std::unique_ptr<Child>> apps_;
  std::vector<std::string> app_labels_;  // "app 3 on host-b: serve", parallel to apps_
  int app_counter_ = 0;
};

// The two-host tests: TEST_P with kHostVariants runs each in every variant.
class TwoHosts : public TwoHostsBase, public ::testing::WithParamInterface<HostVariant> {
 protected:
  HostVariant variant() const override { return GetParam(); }
};

// Result lines of the testapp: {"CODE":N,...} members of `key` in a JSON
// line (e.g. "pre" in peer-load's summary), as a map.
std::map<std::string, uint64_t> CodeCounts(const std::string& line, const std::string& key);
// One line about a link: state, generation, transport, rtt, last error and
// the counters, for logs and failure messages.
std::string LinkSummary(const v1::LinkInfo& link);
// Signed integer field ("max_overrun_ms":-4800); nullopt if absent.
std::optional<int64_t> IntField(const std::string& line, const std::string& key);

}  // namespace mcdma::itest
