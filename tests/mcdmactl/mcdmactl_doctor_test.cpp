// mcdmactl doctor's checks on fed inputs: the recorded Soft-RoCE devices
// (tests/unit/data/rxe_veth.sysfs) and variations of them, rlimits, key
// files and daemon replies, asserting on each verdict and on the fix naming
// the concrete interface, file or peer. The fabric key, daemon and link
// checks are in mcdmactl_doctor_daemon_test.cpp, the command line end to end
// in mcdmactl_doctor_cli_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctor/checks.hpp"
#include "mcdmactl_doctor_darwin_test_support.hpp"

namespace mcdma::tools::doctor {
namespace {

namespace verbs = driver::verbs;

using darwin_test::Has;

std::vector<verbs::DeviceInfo> RxeDevices() {
  std::ifstream file(std::string(MCDMA_TEST_DATA_DIR) + "/rxe_veth.sysfs");
  std::stringstream text;
  text << file.rdbuf();
  auto parsed = verbs::ParseDeviceDump(text.str());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed.value() : std::vector<verbs::DeviceInfo>{};
}

// A healthy host: defaults, rxe1/rxe2, unlimited memlock, daemon up, no links.
DoctorInputs HealthyHost() {
  DoctorInputs in;
  EXPECT_TRUE(daemon::Validate(in.config.options).ok());
  in.config.options.verbs_interface = "veth0";
  in.devices.devices = RxeDevices();
  in.memlock.infinite = true;
  in.daemon.socket = "/run/mcdma/rpcd.sock";
  in.daemon.reply.set_version("0.1.0");
  in.daemon.reply.set_state("serving");
  in.daemon.links_status = Status::Ok();
  in.daemon.links.set_peering(true);
  in.daemon.links.set_fabric_key_fingerprint("3fa9c01b");
  return in;
}

verbs::PortInfo& Port1(DoctorInputs& in, size_t device = 0) {
  return in.devices.devices.at(device).ports.at(0);
}

TEST(DoctorChecks, ConfigWithoutFileSaysDefaults) {
  DoctorInputs in = HealthyHost();
  CheckResult r = CheckConfig(in.config);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "no config file; defaults");
  in.config.path = "/etc/mcdma/rpcd.toml";
  in.config.status = Status(Code::kInvalid, "/etc/mcdma/rpcd.toml: verbs.prot: unknown key");
  r = CheckConfig(in.config);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.detail, "verbs.prot: unknown key")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "mcdma-rpcd --config /etc/mcdma/rpcd.toml --check")) << r.fix;
}

TEST(DoctorChecks, NoRdmaDeviceFailsUnlessEveryPeerUsesTcp) {
  DoctorInputs in = HealthyHost();
  in.devices.devices.clear();
  CheckResult r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "no RDMA device");
  EXPECT_TRUE(Has(r.detail, "libibverbs lists none")) << r.detail;
  EXPECT_TRUE(Has(r.detail, "fall back to tcp")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "rdma link add rxe0 type rxe netdev veth0")) << r.fix;
  EXPECT_TRUE(Has(r.fix, "ibv_devices")) << r.fix;
  in.config.options.peers = {{"spark-2", "10.0.0.2", "tcp"}, {"spark-3", "10.0.0.3", "tcp"}};
  r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(r.summary, "no RDMA device; every peer uses tcp");
  in.config.options.peers.push_back({"mac-1", "10.0.0.9", "verbs"});
  r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.detail, "(mac-1) cannot come up")) << r.detail;
  for (auto id : {"port_active", "gid", "profile", "memlock"}) {
    for (const auto& c : RunChecks(in)) {
      if (c.id == id) {
        EXPECT_EQ(c.verdict, Verdict::kSkip) << id;
      }
    }
  }
}

TEST(DoctorChecks, ConfiguredDeviceMustExist) {
  DoctorInputs in = HealthyHost();
  CheckResult r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "rxe1 (driver rxe)");
  in.config.options.verbs_device = "rxe2";
  EXPECT_EQ(CheckRdmaDevice(in).summary, "rxe2 (driver rxe)");
  in.config.options.verbs_device = "mlx5_0";
  r = CheckRdmaDevice(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "verbs.device \"mlx5_0\" not found");
  EXPECT_TRUE(Has(r.fix, "set verbs.device to one of rxe1, rxe2")) << r.fix;
  EXPECT_EQ(CheckPortActive(in).verdict, Verdict::kSkip);
}

TEST(DoctorChecks, DownPortFailsNamingStateAndInterface) {
  DoctorInputs in = HealthyHost();
  CheckResult r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "rxe1 port 1 ACTIVE on veth0");
  Port1(in).state = verbs::PortState::kDown;
  Port1(in, 1).state = verbs::PortState::kDown;
  r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "rxe1 port 1 is DOWN on veth0");
  EXPECT_TRUE(Has(r.fix, "ip link set veth0 up; check the cable")) << r.fix;
  // With rxe1 down the daemon takes the first device with an ACTIVE port.
  Port1(in, 1).state = verbs::PortState::kActive;
  EXPECT_EQ(CheckPortActive(in).summary, "rxe2 port 1 ACTIVE on veth1");
  in.config.options.verbs_port = 2;
  r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.fix, "set verbs.port to one of 1");
}

TEST(DoctorChecks, UnqueryableDeviceFailsWithTheVerbsError) {
  DoctorInputs in = HealthyHost();
  in.devices.devices = {verbs::DeviceInfo{}};
  in.devices.devices[0].name = "rxe1";
  in.devices.describe_errors.emplace(
      "rxe1", Status(Code::kPermissionDenied, "ibv_open_device(rxe1): Permission denied"));
  CheckResult r = CheckPortActive(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.detail, "ibv_open_device(rxe1)")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "/dev/infiniband/uverbs")) << r.fix;
  EXPECT_EQ(CheckGid(in).verdict, Verdict::kSkip);
}

TEST(DoctorChecks, GidIsTheIpv4MappedRoceV2OneOnTheInterface) {
  DoctorInputs in = HealthyHost();
  CheckResult r = CheckGid(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, "index 1 0000:0000:0000:0000:0000:ffff:0a00:0101 (RoCE v2, veth0)");
  EXPECT_TRUE(Has(r.detail, "10.0.1.1 on verbs.interface veth0")) << r.detail;
  // The interface is not rxe1's: say which one it is on.
  in.config.options.verbs_interface = "eth0";
  r = CheckGid(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.fix, "set verbs.interface to the interface rxe1 is on (veth0)")) << r.fix;
  EXPECT_TRUE(Has(r.fix, "set verbs.device to the device on eth0")) << r.fix;
}

TEST(DoctorChecks, NoIpv4MappedGidFailsListingThePortsGids) {
  DoctorInputs in = HealthyHost();
  auto& gids = Port1(in).gids;
  gids.erase(gids.begin() + 1);  // only the link-local fe80:: one is left
  CheckResult r = CheckGid(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "no usable GID on rxe1 port 1");
  EXPECT_TRUE(Has(r.detail, "0: fe80:0000:0000:0000:5465:3dff:fea2:1c7f (RoCE v2, veth0)"))
      << r.detail;
  EXPECT_TRUE(Has(r.fix, "give veth0 an IPv4 address (ip addr add ADDR/LEN dev veth0)")) << r.fix;
  EXPECT_TRUE(Has(r.fix, "set verbs.gid_index")) << r.fix;
  in.config.options.verbs_gid_index = 0;
  r = CheckGid(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_TRUE(Has(r.detail, "configured verbs.gid_index")) << r.detail;
}

TEST(DoctorChecks, ProfileSummarizesTheCapsInForce) {
  DoctorInputs in = HealthyHost();
  CheckResult r = CheckProfile(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary,
            "linux-rc: max outstanding 1024, reads 16, registration up to 1.0 TiB, at most "
            "524287 registrations");
  EXPECT_TRUE(Has(r.detail, "detected linux-rc for rxe1")) << r.detail;
  in.config.options.verbs_profile = "mcdma-cx5";
  r = CheckProfile(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_TRUE(Has(r.summary, "mcdma-cx5: max outstanding 31, reads 1, registration up to 4.0 MiB"))
      << r.summary;
  EXPECT_TRUE(Has(r.detail, "overrides it")) << r.detail;
}

TEST(DoctorChecks, MemlockNeedsTheLinkBuffersPlusHeadroom) {
  DoctorInputs in = HealthyHost();
  // 1 peer (the minimum) x 2 x 64 slots x 256 KiB + 64 MiB.
  EXPECT_EQ(MemlockNeeded(in.config.options), 96ull << 20);
  EXPECT_EQ(CheckMemlock(in).verdict, Verdict::kOk);
  EXPECT_EQ(CheckMemlock(in).summary, "RLIMIT_MEMLOCK unlimited");
  in.memlock.infinite = false;
  in.memlock.soft_bytes = 8ull << 20;
  in.memlock.hard_bytes = 8ull << 20;
  CheckResult r = CheckMemlock(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.summary, "RLIMIT_MEMLOCK 8.0 MiB < 96.0 MiB needed");
  EXPECT_TRUE(Has(r.detail, "x 2 x link.recv_slots (64) x link.slot_bytes (256.0 KiB)"))
      << r.detail;
  EXPECT_TRUE(Has(r.fix,
                  "ulimit -l unlimited, or LimitMEMLOCK=infinity in the systemd unit "
                  "(systemd/mcdma-rpcd.service has it)"))
      << r.fix;
  in.memlock.soft_bytes = 96ull << 20;
  EXPECT_EQ(CheckMemlock(in).verdict, Verdict::kOk);
  in.config.options.peers = {{"a", "10.0.0.2", "auto"}, {"b", "10.0.0.3", "auto"}};
  EXPECT_EQ(CheckMemlock(in).verdict, Verdict::kFail);
  in.devices.devices.clear();
  EXPECT_EQ(CheckMemlock(in).verdict, Verdict::kSkip);
}

TEST(DoctorChecks, RunChecksKeepsTheOrderAndHealthIgnoresWarnAndSkip) {
  DoctorInputs in = HealthyHost();
  auto results = RunChecks(in);
  std::vector<std::string> ids;
  ids.reserve(results.size());
  for (const auto& r : results) ids.push_back(r.id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"config", "rdma_device", "port_active", "gid", "profile",
                                      "memlock", "fabric_key", "daemon", "budgets", "fabric_store",
                                      "peers", "rdma_ports", "path_mtu", "clock"}));
  EXPECT_TRUE(Healthy(results));
  EXPECT_EQ(results.back().summary,
            "clock sync not needed: nothing compares timestamps across hosts");
  results[5].verdict = Verdict::kWarn;
  EXPECT_TRUE(Healthy(results));
  results[1].verdict = Verdict::kFail;
  EXPECT_FALSE(Healthy(results));
}

}  // namespace
}  // namespace mcdma::tools::doctor
