// The harness's hosts beyond two: three network namespaces on one bridge
// (harness/hosts.hpp, tests/netns/hosts.sh up PREFIX 3), a daemon on one of
// them reachable from the others, every link cut and restored, and nothing
// left once they are removed. Needs root, as the netns variant of the
// two-host tests does; skips, saying why, otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daemon_fixture.hpp"
#include "harness/daemons.hpp"
#include "harness/hosts.hpp"
#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

// Whether a TCP connection from `from` to `to`'s peer port succeeds.
bool Reaches(const harness::Host& from, const harness::DaemonHost& to) {
  CommandResult r = RunCommand(
      harness::InNamespace(from.netns,
                           {"/bin/bash", "-c",
                            "exec 3<>/dev/tcp/" + to.address + "/" + std::to_string(to.peer_port)}),
      Millis(10000));
  return r.exit_code() == 0;
}

bool NamespaceExists(const std::string& name) {
  return RunCommand({"/bin/bash", "-c", "ip netns list | awk '{print $1}' | grep -qx " + name},
                    Millis(10000))
             .exit_code() == 0;
}

TEST(HarnessHosts, ThreeNamespacesOnOneBridgeReachEachOtherUntilCut) {
  Status check = harness::Hosts::Check(kHostsScript);
  if (check.code() == Code::kUnavailable) {
    GTEST_SKIP() << kHostsScript << " check: " << check.message()
                 << "(run as root to test hosts in network namespaces)";
  }
  ASSERT_TRUE(check.ok()) << check.message();
  TempDir dir;
  ASSERT_TRUE(dir.ok()) << dir.error();
  const std::string prefix = "mchh" + std::to_string(getpid() % 100000);
  auto made = harness::Hosts::MakeNamespaces(kHostsScript, prefix, 3);
  ASSERT_TRUE(made.ok()) << made.status().message();
  harness::Hosts& hosts = **made;
  ASSERT_EQ(hosts.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(hosts[i].id, harness::HostId(i));
    EXPECT_EQ(hosts[i].netns, prefix + "-" + static_cast<char>('a' + i));
    EXPECT_TRUE(NamespaceExists(hosts[i].netns)) << hosts[i].netns;
  }

  // A daemon on host-c, listening for peers on its own address.
  harness::DaemonHost c;
  static_cast<harness::Host&>(c) = hosts[2];
  c.socket = dir.Join("c.sock");
  c.log = dir.Join("daemon-host-c.log");
  c.key = dir.Join("fabric.key");
  c.peer_port = harness::kPeerPort;
  c.data_port = harness::kDataPort;
  ASSERT_TRUE(harness::WriteFabricKey(c.key).ok());
  Status started = harness::StartDaemon(kDaemonPath, c, kDaemonListenWait);
  ASSERT_TRUE(started.ok()) << started.message();

  EXPECT_TRUE(Reaches(hosts[0], c)) << "host-a cannot reach host-c's daemon";
  EXPECT_TRUE(Reaches(hosts[1], c)) << "host-b cannot reach host-c's daemon";
  CommandResult cut = hosts.Script("cut");
  ASSERT_EQ(cut.exit_code(), 0) << cut.Describe();
  EXPECT_FALSE(Reaches(hosts[0], c)) << "host-a still reaches host-c with every link cut";
  CommandResult restore = hosts.Script("restore");
  ASSERT_EQ(restore.exit_code(), 0) << restore.Describe();
  EXPECT_TRUE(PollUntil([&] { return Reaches(hosts[0], c); }, Millis(10000), Millis(200)))
      << "host-a does not reach host-c again after the links were restored";

  EXPECT_TRUE(ExitedWith(c.daemon->Stop(SIGTERM, Millis(15000)), 0))
      << "host-c's daemon did not exit 0 on SIGTERM\n"
      << harness::LastLines(ReadFile(c.log), 20);
  CommandResult down = hosts.Down();
  EXPECT_EQ(down.exit_code(), 0) << down.Describe();
  for (const std::string& ns : {prefix + "-a", prefix + "-b", prefix + "-c", prefix + "-br"}) {
    EXPECT_FALSE(NamespaceExists(ns)) << ns << " is left after hosts.sh down";
  }
}

}  // namespace
}  // namespace mcdma::itest
