// mcdmactl doctor on a whole Mac host, run on Linux: a recorded Mac
// (tests/unit/data/darwin/: devices, command outputs, interfaces) through
// the common device and daemon checks, whose fixes must name macOS commands,
// through RunChecks (the macOS order, text and JSON output), and the command
// runner and interface listing that gather the inputs on a Mac. The parsers
// and macOS checks alone are in mcdmactl_doctor_darwin_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctor/checks.hpp"
#include "doctor/darwin.hpp"
#include "doctor/darwin_gather.hpp"
#include "doctor/report.hpp"
#include "mcdmactl_doctor_darwin_test_support.hpp"

namespace mcdma::tools::doctor {
namespace {

namespace verbs = driver::verbs;

using darwin_test::Data;
using darwin_test::Has;
using darwin_test::Interfaces;
using darwin_test::Ran;

// A healthy Mac: mcrdma0 (ConnectX-5) and rdma_en2 (Thunderbolt), the kext
// loaded, RDMA over Thunderbolt enabled, the bridge off, launchd's memlock
// unlimited, both peers on the management network (en0), the daemon up.
DoctorInputs MacHost() {
  DoctorInputs in;
  in.host_os = platform::Os::kMacOS;
  EXPECT_TRUE(daemon::Validate(in.config.options).ok());
  in.config.options.verbs_interface = "mcrdma0";
  in.config.options.peers = {{"mac-2", "10.0.0.12", "auto"}, {"spark-1", "10.0.0.21:7500", "auto"}};
  auto devices = verbs::ParseDeviceDump(Data("devices.dump"));
  EXPECT_TRUE(devices.ok()) << devices.status().ToString();
  if (devices.ok()) in.devices.devices = devices.value();
  in.darwin.rdma_ctl = Ran("rdma_ctl status", Data("rdma_ctl_enabled.txt"));
  in.darwin.kmutil =
      Ran("kmutil showloaded --list-only", Data("kmutil_loaded.txt"), 0, Data("kmutil_stderr.txt"));
  in.darwin.networksetup =
      Ran("networksetup -listallnetworkservices", Data("networksetup_bridge_off.txt"));
  in.darwin.memlock = Ran("launchctl limit memlock", Data("launchctl_memlock_unlimited.txt"));
  in.darwin.interfaces.addresses = Interfaces("ifaddrs_ok.txt");
  in.daemon.socket = "/var/run/mcdma/rpcd.sock";
  in.daemon.reply.set_version("0.1.0");
  in.daemon.reply.set_state("serving");
  in.daemon.links_status = Status::Ok();
  in.daemon.links.set_peering(true);
  return in;
}

verbs::PortInfo& PortOf(DoctorInputs& in, const std::string& device) {
  for (auto& d : in.devices.devices) {
    if (d.name == device) return d.ports.at(0);
  }
  ADD_FAILURE() << "no device " << device;
  return in.devices.devices.at(0).ports.at(0);
}

// ---- The device checks on a Mac ----

TEST(DoctorDarwinDevices, NoDeviceOnAMacNamesTheKextAndThunderbolt) {
  DoctorInputs in = MacHost();
  in.devices.devices.clear();
  CheckResult r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "no RDMA device");
  EXPECT_TRUE(Has(r.fix, "sudo kmutil load -b org.mcdma.cx5.native")) << r.fix;
  EXPECT_TRUE(Has(r.fix, "enable RDMA over Thunderbolt (see thunderbolt_rdma)")) << r.fix;
  for (const char* linux_only : {"/sys", "rdma link add", "modprobe"}) {
    EXPECT_FALSE(Has(r.fix + r.detail, linux_only)) << linux_only << ": " << r.fix;
  }
}

TEST(DoctorDarwinDevices, DownPortOnAMacNamesTheInterfaceAndTheSwitch) {
  DoctorInputs in = MacHost();
  EXPECT_EQ(CheckPortActive(in).summary, "mcrdma0 port 1 ACTIVE on mcrdma0");
  PortOf(in, "mcrdma0").state = verbs::PortState::kDown;
  PortOf(in, "rdma_en2").state = verbs::PortState::kDown;
  PortOf(in, "mcrdma0").gids.clear();  // the interface then comes from the name
  CheckResult r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "mcrdma0 port 1 is DOWN on mcrdma0");
  EXPECT_EQ(r.fix,
            "sudo ifconfig mcrdma0 up; check the cable and the switch port mcrdma0 is plugged "
            "into (`ifconfig mcrdma0` should say status: active)");
  // Apple's devices report a link layer libibverbs calls InfiniBand: no opensm.
  in.config.options.verbs_device = "rdma_en2";
  PortOf(in, "rdma_en2").link_layer = "InfiniBand";
  r = CheckPortActive(in);
  EXPECT_EQ(r.summary, "rdma_en2 port 1 is DOWN on en2");
  EXPECT_EQ(r.fix,
            "check the Thunderbolt cable on en2 and that the Mac at its other end has RDMA over "
            "Thunderbolt enabled too");
  in.devices.describe_errors.emplace(
      "rdma_en2", Status(Code::kPermissionDenied, "ibv_open_device(rdma_en2): Permission denied"));
  in.devices.devices[1].ports.clear();
  r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.fix, "RDMA over Thunderbolt is enabled (see thunderbolt_rdma)")) << r.fix;
  EXPECT_FALSE(Has(r.fix, "/dev/infiniband")) << r.fix;
}

TEST(DoctorDarwinDevices, MissingRoceV2GidOnAMacAsksForAnAddressOnTheInterface) {
  DoctorInputs in = MacHost();
  EXPECT_EQ(CheckGid(in).summary,
            "index 1 0000:0000:0000:0000:0000:ffff:c0a8:3202 (RoCE v2, mcrdma0)");
  auto& gids = PortOf(in, "mcrdma0").gids;
  gids.erase(gids.begin() + 1);  // only the link-local one is left
  CheckResult r = CheckGid(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "no usable GID on mcrdma0 port 1");
  EXPECT_TRUE(Has(r.fix,
                  "give mcrdma0 an IPv4 address on the RDMA network (e.g. sudo ipconfig set "
                  "mcrdma0 MANUAL 192.168.50.2 255.255.255.0, another address on each host)"))
      << r.fix;
  EXPECT_TRUE(Has(r.fix, "or set verbs.gid_index")) << r.fix;
  EXPECT_FALSE(Has(r.fix, "ip addr")) << r.fix;
  // No interface configured and no GID left: the interface is the device's.
  in.config.options.verbs_interface.clear();
  gids.clear();
  EXPECT_TRUE(Has(CheckGid(in).fix, "give mcrdma0 an IPv4 address")) << CheckGid(in).fix;
}

TEST(DoctorDarwinDevices, DaemonAndLinkFixesOnAMacNameLaunchdAndIfconfig) {
  DoctorInputs in = MacHost();
  in.daemon.status =
      Status(Code::kUnavailable, "connect to /var/run/mcdma/rpcd.sock: No such file");
  CheckResult r = CheckDaemon(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.fix,
                  "start it: sudo launchctl bootstrap system "
                  "/Library/LaunchDaemons/org.mcdma.rpcd.plist, or run mcdma-rpcd"))
      << r.fix;
  in.daemon.status = Status(Code::kTimeout, "deadline exceeded");
  r = CheckDaemon(in);
  EXPECT_TRUE(Has(r.fix, "StandardErrorPath in /Library/LaunchDaemons/org.mcdma.rpcd.plist"))
      << r.fix;
  EXPECT_TRUE(Has(r.fix, "sudo launchctl kickstart -k system/org.mcdma.rpcd")) << r.fix;
  in.daemon.status =
      Status(Code::kPermissionDenied, Reason::kAccessDenied, "connect: Permission denied");
  EXPECT_TRUE(Has(CheckDaemon(in).fix, "run as root (sudo mcdmactl doctor)"));
  for (const auto& code : {Code::kUnavailable, Code::kTimeout, Code::kPermissionDenied}) {
    in.daemon.status = Status(code, "x");
    const std::string fix = CheckDaemon(in).fix;
    for (const char* linux_only : {"systemctl", "journalctl", "usermod"}) {
      EXPECT_FALSE(Has(fix, linux_only)) << fix;
    }
  }
  in.daemon.status = Status::Ok();
  in.daemon.reply.set_state("draining");
  EXPECT_EQ(CheckDaemon(in).fix,
            "start it again once it has exited: sudo launchctl kickstart -k system/org.mcdma.rpcd");
  in.daemon.reply.set_state("serving");
  auto* link = in.daemon.links.add_links();
  link->set_peer("mac-2");
  link->set_state("up");
  link->set_transport("verbs");
  auto* v = link->mutable_verbs();
  v->set_device("mcrdma0");
  v->set_peer_device("mcrdma0");
  v->set_local_mtu(4096);
  v->set_peer_mtu(1024);
  v->set_path_mtu(1024);
  EXPECT_TRUE(Has(CheckPathMtu(in)[0].fix,
                  "set the same MTU on both interfaces (sudo ifconfig mcrdma0 mtu N here and on "
                  "mac-2;"))
      << CheckPathMtu(in)[0].fix;
  in.config.options.fabric_key = "/usr/local/etc/mcdma/fabric.key";
  in.fabric_key.status = Status(Code::kPermissionDenied, Reason::kKeyFileOwner,
                                "/usr/local/etc/mcdma/fabric.key is owned by uid 501, not 0");
  EXPECT_EQ(CheckFabricKey(in).fix,
            "chown the file to the user the daemon runs as (root under launchd: sudo chown root "
            "/usr/local/etc/mcdma/fabric.key), and run doctor as that user (sudo mcdmactl doctor)");
}

// ---- RunChecks on a Mac ----

TEST(DoctorDarwinRun, AMacRunsTheMacChecksInOrder) {
  DoctorInputs in = MacHost();
  // RLIMIT_MEMLOCK of this process is not what a Mac judges.
  in.memlock.soft_bytes = 0;
  auto results = RunChecks(in);
  std::vector<std::string> ids;
  ids.reserve(results.size());
  for (const auto& r : results) ids.push_back(r.id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"config", "thunderbolt_rdma", "cx5_kext", "rdma_device",
                                      "port_active", "gid", "profile", "thunderbolt_bridge",
                                      "memlock", "peer_address", "fabric_key", "daemon", "budgets",
                                      "fabric_store", "peers", "rdma_ports", "path_mtu", "clock"}));
  for (const auto& r : results) {
    EXPECT_NE(r.verdict, Verdict::kFail) << r.id << ": " << r.summary << " / " << r.fix;
  }
  EXPECT_TRUE(Healthy(results));
  EXPECT_EQ(results[8].summary, "launchd memlock unlimited");
  // The same inputs on Linux: no macOS check, the shell's RLIMIT_MEMLOCK.
  in.host_os = platform::Os::kLinux;
  results = RunChecks(in);
  ASSERT_EQ(results.size(), 14u);
  EXPECT_EQ(results[1].id, "rdma_device");
  EXPECT_EQ(results[5].id, "memlock");
  EXPECT_TRUE(Has(results[5].summary, "RLIMIT_MEMLOCK")) << results[5].summary;
}

TEST(DoctorDarwinRun, AnUnhealthyMacPrintsEachFix) {
  DoctorInputs in = MacHost();
  in.config.options.peers[0].address = "192.168.50.3";
  in.darwin.networksetup =
      Ran("networksetup -listallnetworkservices", Data("networksetup_bridge_on.txt"));
  in.darwin.memlock = Ran("launchctl limit memlock", Data("launchctl_memlock_low.txt"));
  const auto results = RunChecks(in);
  std::ostringstream text;
  RenderText(results, text);
  const std::string out = text.str();
  EXPECT_TRUE(Has(out,
                  "[fail] thunderbolt_bridge: \"Thunderbolt Bridge\" is enabled while RDMA over "
                  "Thunderbolt uses rdma_en2\n"))
      << out;
  EXPECT_TRUE(Has(out,
                  "       fix: sudo networksetup -setnetworkserviceenabled \"Thunderbolt Bridge\" "
                  "off\n"))
      << out;
  EXPECT_TRUE(Has(out, "[fail] memlock: launchd memlock 8.0 MiB < 128.0 MiB needed\n")) << out;
  EXPECT_TRUE(Has(out,
                  "[fail] peer_address: peer mac-2 192.168.50.3 (mcrdma0) is on an mcrdma "
                  "interface's subnet\n"))
      << out;
  EXPECT_TRUE(Has(out, "[ ok ] cx5_kext: org.mcdma.cx5.native 1.2.0 loaded\n")) << out;
  EXPECT_TRUE(Has(out, "unhealthy: failed thunderbolt_bridge, memlock, peer_address\n")) << out;
  const std::string json = RenderJson(results);
  EXPECT_TRUE(Has(json,
                  "{\"id\":\"thunderbolt_rdma\",\"verdict\":\"ok\",\"summary\":\"RDMA over "
                  "Thunderbolt enabled\""))
      << json;
  EXPECT_TRUE(Has(json, "\"healthy\":false")) << json;
}

TEST(DoctorDarwinRun, TheContextTakesEachPeersHostWithoutItsPort) {
  DoctorInputs in = MacHost();
  in.config.options.peers.push_back({"mac-5", "[fd00::5]:7471", "tcp"});
  const DarwinContext ctx = DarwinContextOf(in);
  EXPECT_EQ(ctx.devices, (std::vector<std::string>{"mcrdma0", "rdma_en2"}));
  EXPECT_EQ(ctx.chosen_device, "mcrdma0");
  EXPECT_FALSE(ctx.all_peers_tcp);
  ASSERT_EQ(ctx.peers.size(), 3u);
  EXPECT_EQ(ctx.peers[0].host, "10.0.0.12");
  EXPECT_EQ(ctx.peers[1].host, "10.0.0.21");
  EXPECT_EQ(ctx.peers[2].host, "fd00::5");
  // 3 peers x 2 x 64 slots x 256 KiB + 64 MiB.
  EXPECT_EQ(ctx.memlock_needed, 160ull << 20);
  EXPECT_TRUE(Has(ctx.memlock_formula, "max(peers, 1) (3)")) << ctx.memlock_formula;
}

// ---- Gathering (POSIX, so it runs here too) ----

TEST(DoctorDarwinGather, RunCommandCollectsOutputAndExitCode) {
  const std::string sh = FindTool("sh");
  ASSERT_FALSE(sh.empty());
  CommandOutput c = RunCommand("sh", {sh, "-c", "echo out; echo $LC_ALL >&2; exit 3"},
                               std::chrono::seconds(10), 1 << 20);
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(c.command, "sh");
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_EQ(c.out, "out\n");
  EXPECT_EQ(c.err, "C\n");  // the child's locale is pinned
  EXPECT_EQ(FindTool("mcdma-no-such-tool"), "");
  c = RunCommand("missing", {"mcdma-no-such-dir/tool"}, std::chrono::seconds(10), 1 << 20);
  EXPECT_TRUE(!c.status.ok() || c.exit_code == 127) << c.status.ToString();
}

TEST(DoctorDarwinGather, RunCommandKillsWhatHangsOrFloods) {
  const std::string sh = FindTool("sh");
  ASSERT_FALSE(sh.empty());
  const auto start = std::chrono::steady_clock::now();
  CommandOutput c =
      RunCommand("sleep", {sh, "-c", "exec sleep 30"}, std::chrono::milliseconds(200), 1 << 20);
  EXPECT_EQ(c.status.code(), Code::kTimeout) << c.status.ToString();
  EXPECT_EQ(c.status.message(), "sleep did not finish within 200 ms");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  c = RunCommand("yes", {sh, "-c", "exec yes"}, std::chrono::seconds(10), 64 << 10);
  EXPECT_EQ(c.status.code(), Code::kOutOfRange) << c.status.ToString();
  EXPECT_EQ(c.status.message(), "yes printed more than 65536 bytes");
}

TEST(DoctorDarwinGather, InterfaceAddressesIncludeLoopback) {
  InterfacesInput in = ListInterfaceAddresses();
  ASSERT_TRUE(in.status.ok()) << in.status.ToString();
  bool loopback = false;
  for (const auto& a : in.addresses) {
    if (a.address == "127.0.0.1") loopback = a.family == "inet" && a.netmask == "255.0.0.0";
  }
  EXPECT_TRUE(loopback);
}

}  // namespace
}  // namespace mcdma::tools::doctor
