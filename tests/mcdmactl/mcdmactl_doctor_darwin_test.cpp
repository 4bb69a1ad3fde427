// mcdmactl doctor's macOS checks, run on Linux: the parsers against recorded
// command outputs (tests/unit/data/darwin/, written from the commands'
// documented formats, not captured on a Mac) and each macOS check's
// verdicts and fix, failing cases included. A whole Mac host (the common
// checks' macOS wording, RunChecks, gathering) is in
// mcdmactl_doctor_darwin_host_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctor/darwin.hpp"
#include "mcdmactl_doctor_darwin_test_support.hpp"

namespace mcdma::tools::doctor {
namespace {

using darwin_test::Data;
using darwin_test::Has;
using darwin_test::Interfaces;
using darwin_test::Ran;

CommandOutput NotFound(const std::string& command, const std::string& tool) {
  CommandOutput c;
  c.command = command;
  c.status = Status(Code::kNotFound, tool + " not found in /usr/bin, /usr/sbin, /bin, /sbin");
  return c;
}

// The context of a Mac whose devices are `devices`, the daemon using the
// first; 96 MiB of locked memory needed.
DarwinContext Context(std::vector<std::string> devices) {
  DarwinContext ctx;
  ctx.devices = std::move(devices);
  if (!ctx.devices.empty()) ctx.chosen_device = ctx.devices.front();
  ctx.memlock_needed = 96ull << 20;
  ctx.memlock_formula = "needs 96.0 MiB = max(peers, 1) (1) x 2 x ...";
  return ctx;
}

// ---- Parsers ----

TEST(DoctorDarwinParse, RdmaCtlStatusReadsEnabledOrDisabledInAnyCase) {
  EXPECT_TRUE(ParseRdmaCtlStatus(Data("rdma_ctl_enabled.txt")).value());
  EXPECT_FALSE(ParseRdmaCtlStatus(Data("rdma_ctl_disabled.txt")).value());
  EXPECT_TRUE(ParseRdmaCtlStatus("  RDMA over Thunderbolt: ENABLED.\n\n").value());
  EXPECT_FALSE(ParseRdmaCtlStatus("\tDisabled\r\n").value());
  EXPECT_FALSE(ParseRdmaCtlStatus("RDMA is not enabled\n").value());
}

TEST(DoctorDarwinParse, RdmaCtlStatusWithoutAVerdictCannotBeParsed) {
  auto usage = ParseRdmaCtlStatus(Data("rdma_ctl_usage.txt"));
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), Code::kInvalid);
  EXPECT_EQ(usage.status().message(),
            "could not parse `rdma_ctl status` output \"usage: rdma_ctl [enable | disable | "
            "status]\": expected it to say enabled or disabled");
  EXPECT_TRUE(Has(ParseRdmaCtlStatus("").status().message(), "output (no output)"));
  EXPECT_TRUE(Has(ParseRdmaCtlStatus("enabled\ndisabled\n").status().message(),
                  "it says both enabled and disabled"));
}

TEST(DoctorDarwinParse, KmutilRowsGiveBundleIdAndVersion) {
  auto kexts = ParseKmutilShowloaded(Data("kmutil_loaded.txt"));
  ASSERT_TRUE(kexts.ok()) << kexts.status().ToString();
  ASSERT_EQ(kexts->size(), 9u);
  EXPECT_EQ(kexts->front().bundle_id, "com.apple.kpi.bsd");
  EXPECT_EQ(kexts->front().version, "25.2.0");
  EXPECT_EQ(kexts->back().bundle_id, "org.mcdma.cx5.native");
  EXPECT_EQ(kexts->back().version, "1.2.0");
  // With the header (no --list-only) and with kmutil's stderr warning mixed in.
  auto header = ParseKmutilShowloaded(Data("kmutil_stderr.txt") + Data("kmutil_loaded_header.txt"));
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  ASSERT_EQ(header->size(), 2u);
  EXPECT_EQ(header->back().bundle_id, "org.mcdma.cx5.native");
  auto without = ParseKmutilShowloaded(Data("kmutil_not_loaded.txt"));
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->size(), 8u);
  for (const auto& k : *without) EXPECT_NE(k.bundle_id, kCx5BundleId);
}

TEST(DoctorDarwinParse, KmutilOutputWithoutRowsCannotBeParsed) {
  auto warning_only = ParseKmutilShowloaded(Data("kmutil_stderr.txt"));
  ASSERT_FALSE(warning_only.ok());
  EXPECT_TRUE(Has(warning_only.status().message(),
                  "could not parse `kmutil showloaded` output \"No variant specified, falling back "
                  "to release\": expected rows of"))
      << warning_only.status().message();
  // A header and no rows is an (odd) empty list, not a parse failure.
  auto header_only = ParseKmutilShowloaded("Index Refs Address Size Wired Name (Version) UUID\n");
  ASSERT_TRUE(header_only.ok());
  EXPECT_TRUE(header_only->empty());
}

TEST(DoctorDarwinParse, NetworkServicesMarkDisabledWithAnAsterisk) {
  auto on = ParseNetworkServices(Data("networksetup_bridge_on.txt"));
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  ASSERT_EQ(on->size(), 3u);
  EXPECT_EQ((*on)[1].name, "Thunderbolt Bridge");
  EXPECT_TRUE((*on)[1].enabled);
  auto off = ParseNetworkServices(Data("networksetup_bridge_off.txt"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)[1].name, "Thunderbolt Bridge");
  EXPECT_FALSE((*off)[1].enabled);
  EXPECT_TRUE((*off)[2].enabled);
  auto spaced = ParseNetworkServices(
      "  an asterisk (*) denotes that a network service is disabled.  \n*  Wi-Fi  \n\n");
  ASSERT_TRUE(spaced.ok());
  ASSERT_EQ(spaced->size(), 1u);
  EXPECT_EQ((*spaced)[0].name, "Wi-Fi");
  EXPECT_FALSE((*spaced)[0].enabled);
  auto error = ParseNetworkServices("** Error: The parameters were not valid.\n");
  ASSERT_FALSE(error.ok());
  EXPECT_TRUE(Has(error.status().message(), "expected \"An asterisk (*) denotes"))
      << error.status().message();
}

TEST(DoctorDarwinParse, LaunchctlLimitReadsUnlimitedOrBytes) {
  auto unlimited = ParseLaunchctlLimit(Data("launchctl_memlock_unlimited.txt"), "memlock");
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().ToString();
  EXPECT_TRUE(unlimited->soft_unlimited);
  EXPECT_TRUE(unlimited->hard_unlimited);
  auto low = ParseLaunchctlLimit(Data("launchctl_memlock_low.txt"), "memlock");
  ASSERT_TRUE(low.ok());
  EXPECT_FALSE(low->soft_unlimited);
  EXPECT_EQ(low->soft, 8ull << 20);
  EXPECT_EQ(low->hard, 8ull << 20);
  auto mixed = ParseLaunchctlLimit("MEMLOCK 65536 Unlimited\n", "memlock");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->soft, 65536u);
  EXPECT_TRUE(mixed->hard_unlimited);
  // RLIM_INFINITY printed as a number.
  auto infinity =
      ParseLaunchctlLimit("memlock 9223372036854775807 99999999999999999999\n", "memlock");
  ASSERT_TRUE(infinity.ok());
  EXPECT_TRUE(infinity->soft_unlimited);
  EXPECT_TRUE(infinity->hard_unlimited);
  auto other = ParseLaunchctlLimit("\tmaxfiles    256            unlimited      \n", "memlock");
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(Has(other.status().message(),
                  "could not parse `launchctl limit memlock` output \"maxfiles    256            "
                  "unlimited\": expected \"memlock SOFT HARD\""))
      << other.status().message();
  EXPECT_FALSE(ParseLaunchctlLimit("memlock lots lots\n", "memlock").ok());
}

TEST(DoctorDarwinParse, InterfaceListsAndSubnets) {
  const auto ifs = Interfaces("ifaddrs_ok.txt");
  ASSERT_EQ(ifs.size(), 7u);
  const InterfaceAddress& mcrdma = ifs[4];
  EXPECT_EQ(mcrdma.name, "mcrdma0");
  EXPECT_EQ(mcrdma.netmask, "255.255.255.0");
  EXPECT_TRUE(OnSubnet("192.168.50.3", mcrdma));
  EXPECT_FALSE(OnSubnet("192.168.51.3", mcrdma));
  EXPECT_FALSE(OnSubnet("10.0.0.12", mcrdma));
  EXPECT_FALSE(OnSubnet("fd00::3", mcrdma));  // another family
  EXPECT_FALSE(OnSubnet("mac-2.lan", mcrdma));
  EXPECT_TRUE(OnSubnet("fe80::1%en0", ifs[5]));  // the zone is ignored
  EXPECT_TRUE(OnSubnet("192.168.50.2", {"mcrdma1", "inet", "192.168.50.2", ""}));
  EXPECT_FALSE(OnSubnet("192.168.50.3", {"mcrdma1", "inet", "192.168.50.2", ""}));
  auto bad = ParseInterfaceList("lo0 inet 127.0.0.1\nen0 ipx 10.0.0.1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "interface list line 2 \"en0 ipx 10.0.0.1\""))
      << bad.status().message();
  EXPECT_EQ(MacDeviceInterface("mcrdma0"), "mcrdma0");
  EXPECT_EQ(MacDeviceInterface("rdma_en3"), "en3");
  EXPECT_EQ(MacDeviceInterface("mlx5_0"), "");
}

// ---- macOS checks ----

TEST(DoctorDarwinChecks, DisabledThunderboltRdmaFailsWithTheRecoveryFix) {
  DarwinInputs in;
  in.rdma_ctl = Ran("rdma_ctl status", Data("rdma_ctl_disabled.txt"));
  CheckResult r = CheckThunderboltRdma(in, Context({}));
  EXPECT_EQ(r.id, "thunderbolt_rdma");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "RDMA over Thunderbolt is disabled");
  EXPECT_EQ(r.fix,
            "boot into macOS Recovery, open Terminal (Utilities > Terminal), run `rdma_ctl "
            "enable`, and reboot; `ibv_devices` then lists an rdma_en device per Thunderbolt "
            "port");
  // Not needed while the daemon uses the ConnectX-5, or every peer uses tcp.
  r = CheckThunderboltRdma(in, Context({"mcrdma0"}));
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(r.summary,
            "RDMA over Thunderbolt disabled; not needed: the daemon uses mcrdma0 "
            "(ConnectX-5)");
  DarwinContext tcp = Context({});
  tcp.all_peers_tcp = true;
  EXPECT_EQ(CheckThunderboltRdma(in, tcp).verdict, Verdict::kSkip);
  in.rdma_ctl = Ran("rdma_ctl status", Data("rdma_ctl_enabled.txt"));
  r = CheckThunderboltRdma(in, Context({"rdma_en2", "rdma_en3"}));
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "RDMA over Thunderbolt enabled");
  EXPECT_TRUE(Has(r.detail, "libibverbs lists rdma_en2, rdma_en3")) << r.detail;
}

TEST(DoctorDarwinChecks, RdmaCtlThatCannotRunOrBeParsedWarns) {
  DarwinInputs in;
  in.rdma_ctl = NotFound("rdma_ctl status", "rdma_ctl");
  CheckResult r = CheckThunderboltRdma(in, Context({}));
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(r.summary, "cannot run `rdma_ctl status`");
  EXPECT_TRUE(Has(r.detail, "rdma_ctl not found in /usr/bin")) << r.detail;
  EXPECT_TRUE(Has(r.detail, "macOS 26.2 or later")) << r.detail;
  // Its devices say it is on, whatever rdma_ctl could not tell.
  EXPECT_EQ(CheckThunderboltRdma(in, Context({"rdma_en2"})).verdict, Verdict::kOk);
  in.rdma_ctl = Ran("rdma_ctl status", Data("rdma_ctl_usage.txt"), 64, "rdma_ctl: unknown verb\n");
  r = CheckThunderboltRdma(in, Context({}));
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(r.summary, "could not parse `rdma_ctl status`");
  EXPECT_TRUE(Has(r.detail,
                  "expected it to say enabled or disabled; it exited 64 saying "
                  "\"rdma_ctl: unknown verb\""))
      << r.detail;
  EXPECT_TRUE(Has(r.fix, "run `rdma_ctl status` in Terminal")) << r.fix;
}

TEST(DoctorDarwinChecks, Cx5KextLoadedReportsItsVersion) {
  DarwinInputs in;
  in.kmutil = Ran("kmutil showloaded --list-only", Data("kmutil_loaded.txt"));
  CheckResult r = CheckCx5Kext(in, Context({"mcrdma0", "rdma_en2"}));
  EXPECT_EQ(r.id, "cx5_kext");
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "org.mcdma.cx5.native 1.2.0 loaded");
  EXPECT_EQ(r.detail, "its RDMA devices: mcrdma0");
}

TEST(DoctorDarwinChecks, Cx5KextNotLoadedFailsWithHowToLoadAndApproveIt) {
  DarwinInputs in;
  in.kmutil = Ran("kmutil showloaded --list-only", Data("kmutil_not_loaded.txt"), 0,
                  Data("kmutil_stderr.txt"));
  CheckResult r = CheckCx5Kext(in, Context({}));
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "org.mcdma.cx5.native is not loaded");
  EXPECT_TRUE(Has(r.detail, "kmutil lists 8 loaded extensions, not org.mcdma.cx5.native"))
      << r.detail;
  EXPECT_EQ(r.fix,
            "sudo kmutil load -b org.mcdma.cx5.native; if macOS says the extension was never "
            "approved, approve it in System Settings > Privacy & Security, reboot, and load it "
            "again");
  r = CheckCx5Kext(in, Context({"rdma_en2"}));
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(r.summary,
            "org.mcdma.cx5.native not loaded; not needed: the daemon uses rdma_en2 (Thunderbolt)");
  // Only kmutil's warning on stdout: cannot tell.
  in.kmutil = Ran("kmutil showloaded --list-only", Data("kmutil_stderr.txt"), 1);
  r = CheckCx5Kext(in, Context({}));
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(r.summary, "could not parse `kmutil showloaded --list-only`");
  EXPECT_TRUE(Has(r.detail, "; it exited 1")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "kmutil showloaded --list-only | grep org.mcdma.cx5.native")) << r.fix;
}

TEST(DoctorDarwinChecks, ThunderboltBridgeEnabledBesideRdmaEnDevicesFails) {
  DarwinInputs in;
  in.networksetup = Ran("networksetup -listallnetworkservices", Data("networksetup_bridge_on.txt"));
  CheckResult r = CheckThunderboltBridge(in, Context({"rdma_en2", "rdma_en3"}));
  EXPECT_EQ(r.id, "thunderbolt_bridge");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(
      r.summary,
      "\"Thunderbolt Bridge\" is enabled while RDMA over Thunderbolt uses rdma_en2, rdma_en3");
  EXPECT_TRUE(Has(r.detail, "traffic storms and loops")) << r.detail;
  EXPECT_EQ(r.fix, "sudo networksetup -setnetworkserviceenabled \"Thunderbolt Bridge\" off");
  // Without rdma_en devices the bridge is only IP over Thunderbolt.
  r = CheckThunderboltBridge(in, Context({"mcrdma0"}));
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(r.summary, "no Thunderbolt RDMA device (rdma_en*)");
  in.networksetup =
      Ran("networksetup -listallnetworkservices", Data("networksetup_bridge_off.txt"));
  r = CheckThunderboltBridge(in, Context({"rdma_en2"}));
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "\"Thunderbolt Bridge\" is disabled");
  in.networksetup = Ran("networksetup -listallnetworkservices",
                        "An asterisk (*) denotes that a network service is disabled.\nWi-Fi\n");
  EXPECT_EQ(CheckThunderboltBridge(in, Context({"rdma_en2"})).summary,
            "no \"Thunderbolt Bridge\" service");
  in.networksetup = Ran("networksetup -listallnetworkservices", "", 4,
                        "** Error: The parameters were not valid.\n");
  r = CheckThunderboltBridge(in, Context({"rdma_en2"}));
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(r.detail, "output (no output)")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "sudo networksetup -setnetworkserviceenabled \"Thunderbolt Bridge\" off"))
      << r.fix;
}

TEST(DoctorDarwinChecks, LaunchdMemlockBelowTheNeedFailsNamingThePlist) {
  DarwinInputs in;
  in.memlock = Ran("launchctl limit memlock", Data("launchctl_memlock_unlimited.txt"));
  CheckResult r = CheckLaunchdMemlock(in, Context({"mcrdma0"}));
  EXPECT_EQ(r.id, "memlock");
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "launchd memlock unlimited");
  in.memlock = Ran("launchctl limit memlock", Data("launchctl_memlock_low.txt"));
  r = CheckLaunchdMemlock(in, Context({"mcrdma0"}));
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "launchd memlock 8.0 MiB < 96.0 MiB needed");
  EXPECT_TRUE(Has(r.detail, "needs 96.0 MiB = max(peers, 1)")) << r.detail;
  EXPECT_TRUE(Has(r.fix,
                  "set MemoryLock under both SoftResourceLimits and HardResourceLimits in "
                  "/Library/LaunchDaemons/org.mcdma.rpcd.plist (launchd/org.mcdma.rpcd.plist.in "
                  "sets both to unlimited)"))
      << r.fix;
  EXPECT_TRUE(Has(r.fix, "sudo launchctl limit memlock unlimited unlimited")) << r.fix;
  in.memlock = Ran("launchctl limit memlock", "\tmemlock     134217728      unlimited      \n");
  EXPECT_EQ(CheckLaunchdMemlock(in, Context({"mcrdma0"})).summary,
            "launchd memlock 128.0 MiB >= 96.0 MiB");
  EXPECT_EQ(CheckLaunchdMemlock(in, Context({})).verdict, Verdict::kSkip);
  in.memlock = Ran("launchctl limit memlock", "Could not get limits\n", 1);
  r = CheckLaunchdMemlock(in, Context({"mcrdma0"}));
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(r.summary, "could not parse `launchctl limit memlock`");
}

TEST(DoctorDarwinChecks, PeerOnAnMcrdmaSubnetFailsNamingPeerAndInterface) {
  DarwinInputs in;
  in.interfaces.addresses = Interfaces("ifaddrs_ok.txt");
  DarwinContext ctx = Context({"mcrdma0"});
  ctx.peers = {{"mac-2", "192.168.50.3"}, {"spark-1", "10.0.0.21"}};
  CheckResult r = CheckPeerAddresses(in, ctx);
  EXPECT_EQ(r.id, "peer_address");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "peer mac-2 192.168.50.3 (mcrdma0) is on an mcrdma interface's subnet");
  EXPECT_TRUE(Has(r.detail, "in the subnet of mcrdma0 192.168.50.2 netmask 255.255.255.0"))
      << r.detail;
  EXPECT_TRUE(Has(r.detail, "carry the ConnectX-5's RDMA, not TCP")) << r.detail;
  EXPECT_EQ(r.fix,
            "in the [[peer]] entry of mac-2, set address to the peer's address on the "
            "management network (an interface other than mcrdma0)");
  ctx.peers.push_back({"mac-3", "192.168.50.4"});
  r = CheckPeerAddresses(in, ctx);
  EXPECT_EQ(r.summary,
            "2 peer addresses are on mcrdma interfaces' subnets: mac-2 192.168.50.3 (mcrdma0), "
            "mac-3 192.168.50.4 (mcrdma0)");
  EXPECT_TRUE(Has(r.fix, "in the [[peer]] entry of mac-2 and mac-3,")) << r.fix;
}

TEST(DoctorDarwinChecks, PeersOnTheManagementNetworkPass) {
  DarwinInputs in;
  in.interfaces.addresses = Interfaces("ifaddrs_ok.txt");
  DarwinContext ctx = Context({"mcrdma0"});
  // Link-local addresses are on every interface, mcrdma0's too: not judged.
  ctx.peers = {{"mac-2", "10.0.0.12"}, {"mac-3", "fe80::1c2b:3aff:fe4d:1"}, {"mac-4", "mac-4.lan"}};
  CheckResult r = CheckPeerAddresses(in, ctx);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "no peer address is on an mcrdma interface");
  EXPECT_TRUE(
      Has(r.detail, "mcrdma interfaces: mcrdma0 192.168.50.2 netmask 255.255.255.0; peers:"))
      << r.detail;
  EXPECT_TRUE(Has(r.detail, "not judged (host names are not resolved): mac-4 (mac-4.lan)"))
      << r.detail;
  in.interfaces.addresses = Interfaces("ifaddrs_no_mcrdma.txt");
  EXPECT_EQ(CheckPeerAddresses(in, ctx).summary, "no mcrdma interface has an address");
  ctx.peers.clear();
  EXPECT_EQ(CheckPeerAddresses(in, ctx).verdict, Verdict::kSkip);
  ctx.peers = {{"mac-2", "10.0.0.12"}};
  in.interfaces.status = Status(Code::kSystem, "getifaddrs: Too many open files (errno 24)");
  r = CheckPeerAddresses(in, ctx);
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(r.detail, "getifaddrs: Too many open files")) << r.detail;
}

}  // namespace
}  // namespace mcdma::tools::doctor
