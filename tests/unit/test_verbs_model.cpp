// The verbs transport's decisions from device descriptions: a description
// recorded from two Soft-RoCE devices on a veth pair, and variants of it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "driver/verbs/verbs_model.hpp"

namespace mcdma::driver::verbs {
namespace {

// A recorded description in tests/unit/data.
std::string Recorded(const char* file = "rxe_veth.sysfs") {
  std::ifstream in(std::string(MCDMA_TEST_DATA_DIR) + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<DeviceInfo> Devices(const char* file = "rxe_veth.sysfs") {
  auto d = ParseDeviceDump(Recorded(file));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : std::vector<DeviceInfo>{};
}

TEST(VerbsModel, ParsesTheRecordedRxeDevices) {
  auto devs = Devices();
  ASSERT_EQ(devs.size(), 2u);
  const DeviceInfo& d = devs[0];
  EXPECT_EQ(d.name, "rxe1");
  EXPECT_EQ(d.driver, "rxe");
  EXPECT_EQ(d.vendor_id, 0xffffffu);
  EXPECT_EQ(d.max_qp_wr, 1048576u);
  EXPECT_EQ(d.max_qp_rd_atom, 128u);
  EXPECT_EQ(d.max_mr_size, UINT64_MAX);
  ASSERT_EQ(d.ports.size(), 1u);
  const PortInfo& p = d.ports[0];
  EXPECT_EQ(p.state, PortState::kActive);
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_EQ(p.active_mtu, 1024u);
  EXPECT_EQ(p.max_mtu, 4096u);
  ASSERT_EQ(p.gids.size(), 2u);
  EXPECT_EQ(p.gids[1].value, "0000:0000:0000:0000:0000:ffff:0a00:0101");
  EXPECT_EQ(p.gids[1].type, GidType::kRoceV2);
  EXPECT_EQ(p.gids[1].netdev, "veth0");
}

TEST(VerbsModel, RefusesMalformedDumpsNamingTheLine) {
  auto r = ParseDeviceDump("rxe1/driver=rxe\nno separator here\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseDeviceDump("rxe1/attr/max_qp_wr=lots\n").ok());
  EXPECT_FALSE(ParseDeviceDump("rxe1/ports/0/state=4: ACTIVE\n").ok());
  EXPECT_FALSE(ParseDeviceDump("rxe1/ports/1/active_mtu=1500\n").ok());
}

TEST(VerbsModel, ChoosesTheIpv4MappedRoceV2GidNotIndexZero) {
  auto devs = Devices();
  ASSERT_FALSE(devs.empty());
  auto g = ChooseGid(devs[0].ports[0], {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->index, 1u);  // index 0 is the link-local one
  auto on_veth0 = ChooseGid(devs[0].ports[0], {.netdev = "veth0", .index = std::nullopt});
  ASSERT_TRUE(on_veth0.ok());
  EXPECT_EQ(on_veth0->index, 1u);
}

TEST(VerbsModel, GidChoiceFollowsTheRuleWhereverTheGidSits) {
  PortInfo p;
  p.gids = {{0, "fe80:0000:0000:0000:0000:0000:0000:0001", GidType::kRoceV2, "eth0"},
            {1, "0000:0000:0000:0000:0000:ffff:0a00:0001", GidType::kRoceV1, "eth0"},
            {2, "fe80:0000:0000:0000:0000:0000:0000:0002", GidType::kRoceV2, "eth1"},
            {3, "0000:0000:0000:0000:0000:ffff:0a00:0002", GidType::kRoceV2, "eth1"},
            {5, "0000:0000:0000:0000:0000:ffff:0a00:0003", GidType::kRoceV2, "eth0"}};
  auto any = ChooseGid(p, {});
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->index, 3u);  // the first RoCE v2 IPv4-mapped one; v1 is skipped
  auto eth0 = ChooseGid(p, {.netdev = "eth0", .index = std::nullopt});
  ASSERT_TRUE(eth0.ok());
  EXPECT_EQ(eth0->index, 5u);
  // No match on the interface: the configured index is the fallback.
  auto fallback = ChooseGid(p, {.netdev = "eth9", .index = 2});
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback->index, 2u);
  auto none = ChooseGid(p, {.netdev = "eth9", .index = std::nullopt});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("on eth9"), std::string::npos);
  EXPECT_NE(none.status().message().find("3: 0000:0000:0000:0000:0000:ffff:0a00:0002 (RoCE v2, "
                                         "eth1)"),
            std::string::npos);
}

TEST(VerbsModel, NegotiatesTheSmallerIbMtu) {
  EXPECT_EQ(NegotiateMtu(4096, 1024).value(), 1024u);
  EXPECT_EQ(NegotiateMtu(1024, 4096).value(), 1024u);
  EXPECT_EQ(NegotiateMtu(2048, 2048).value(), 2048u);
  EXPECT_EQ(NegotiateMtu(1500, 1024).status().code(), Code::kInvalid);
  EXPECT_NE(NegotiateMtu(1024, 9000).status().message().find("peer's MTU 9000"), std::string::npos);
  EXPECT_EQ(MtuCode(256), 1u);
  EXPECT_EQ(MtuCode(4096), 5u);
  EXPECT_EQ(MtuCode(1500), 0u);
}

TEST(VerbsModel, DetectsProfiles) {
  auto devs = Devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(DetectProfile(devs[0]), kProfileLinuxRc);
  DeviceInfo mac;
  mac.name = "mcdma0";
  mac.driver = "mcdma";
  EXPECT_EQ(DetectProfile(mac), kProfileMcdmaCx5);
  DeviceInfo tb;
  tb.name = "tb5_0";
  EXPECT_EQ(DetectProfile(tb), kProfileAppleTb5);
  DeviceInfo mlx;
  mlx.name = "mlx5_0";
  mlx.driver = "mlx5";
  EXPECT_EQ(DetectProfile(mlx), kProfileLinuxRc);
}

std::vector<DeviceInfo> MacDevices() { return Devices("mac_devices.dump"); }

// Apple's Thunderbolt devices take no RC QP (ibv_create_qp fails with errno
// 102), so the profile, and with it the QP type, must follow from the
// description alone: DetectProfile and QpTypeFor see no device, no QP.
TEST(VerbsModel, AppleThunderboltDescriptionSelectsAppleTb5AndUcBeforeAnyQp) {
  auto devs = MacDevices();
  ASSERT_EQ(devs.size(), 2u);
  const DeviceInfo& tb = devs[0];
  ASSERT_EQ(tb.name, "rdma_en2");
  EXPECT_EQ(tb.transport, kTransportAppleThunderbolt);
  EXPECT_EQ(DetectProfile(tb), kProfileAppleTb5);
  auto caps = ProfileCaps(DetectProfile(tb), tb);
  ASSERT_TRUE(caps.ok()) << caps.status().ToString();
  EXPECT_FALSE(caps->one_sided);
  EXPECT_EQ(caps->max_registrations, 100u);
  EXPECT_EQ(QpTypeFor(*caps), QpType::kUc);
  // The transport type alone is enough, whatever the device is called.
  DeviceInfo renamed = tb;
  renamed.name = "tbrdma7";
  EXPECT_EQ(DetectProfile(renamed), kProfileAppleTb5);
  // And the name alone, for a provider that reports another transport.
  DeviceInfo by_name;
  by_name.name = "rdma_en4";
  EXPECT_EQ(DetectProfile(by_name), kProfileAppleTb5);
}

TEST(VerbsModel, McdmaProviderDescriptionSelectsMcdmaCx5AndRc) {
  auto devs = MacDevices();
  ASSERT_EQ(devs.size(), 2u);
  const DeviceInfo& cx5 = devs[1];
  ASSERT_EQ(cx5.name, "mcrdma0");
  EXPECT_EQ(DetectProfile(cx5), kProfileMcdmaCx5);
  DeviceInfo by_name;
  by_name.name = "mcrdma1";
  EXPECT_EQ(DetectProfile(by_name), kProfileMcdmaCx5);
  auto caps = ProfileCaps(DetectProfile(cx5), cx5);
  ASSERT_TRUE(caps.ok()) << caps.status().ToString();
  EXPECT_EQ(QpTypeFor(*caps), QpType::kRc);
  auto gid = ChooseGid(cx5.ports.front(), GidRule{"mcrdma0", std::nullopt});
  ASSERT_TRUE(gid.ok()) << gid.status().ToString();
  EXPECT_EQ(gid->index, 3u);
}

TEST(VerbsModel, ForcingAProfileDecidesTheQpType) {
  auto devs = Devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(QpTypeFor(ProfileCaps(kProfileLinuxRc, devs[0]).value()), QpType::kRc);
  EXPECT_EQ(QpTypeFor(ProfileCaps(kProfileMcdmaCx5, devs[0]).value()), QpType::kRc);
  EXPECT_EQ(QpTypeFor(ProfileCaps(kProfileAppleTb5, devs[0]).value()), QpType::kUc);
}

TEST(VerbsModel, RefusesATransportThatIsNotANumber) {
  auto d = ParseDeviceDump("rdma_en2/transport=Thunderbolt\n");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalid);
  EXPECT_NE(d.status().message().find("transport is not a number"), std::string::npos);
}

TEST(VerbsModel, ProfileCapsAreTheStricterOfProfileAndDevice) {
  auto devs = Devices();
  ASSERT_FALSE(devs.empty());
  auto rc = ProfileCaps(kProfileLinuxRc, devs[0]);
  ASSERT_TRUE(rc.ok());
  EXPECT_TRUE(rc->one_sided);
  EXPECT_EQ(rc->max_outstanding, 1024u);
  EXPECT_EQ(rc->max_outstanding_reads, 16u);
  auto cx5 = ProfileCaps(kProfileMcdmaCx5, devs[0]);
  ASSERT_TRUE(cx5.ok());
  EXPECT_EQ(cx5->profile, "mcdma-cx5");
  EXPECT_EQ(cx5->max_outstanding, 31u);
  EXPECT_EQ(cx5->max_outstanding_reads, 1u);
  EXPECT_EQ(cx5->max_read_bytes, 2u << 20);
  EXPECT_EQ(cx5->max_registration_bytes, 4u << 20);
  EXPECT_EQ(cx5->max_inline_bytes, 28u);
  auto tb5 = ProfileCaps(kProfileAppleTb5, devs[0]);
  ASSERT_TRUE(tb5.ok());
  EXPECT_FALSE(tb5->one_sided);
  EXPECT_EQ(tb5->max_outstanding_reads, 0u);
  EXPECT_EQ(tb5->max_registration_bytes, 0xfa0000u);
  EXPECT_EQ(tb5->max_registrations, 100u);
  // A device stricter than the profile wins where it is stricter.
  DeviceInfo small = devs[0];
  small.max_qp_wr = 16;
  small.max_mr = 50;
  auto forced = ProfileCaps(kProfileAppleTb5, small);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->max_outstanding, 16u);
  EXPECT_EQ(forced->max_registrations, 50u);
  EXPECT_EQ(ProfileCaps("mac-fast", devs[0]).status().code(), Code::kInvalid);
}

// apple-tb5 allows about 10 QPs per device; linux-rc none of its own, so
// the device's max_qp is the budget there, and the smaller of both wins.
TEST(VerbsModel, QueuePairBudgetIsTheStricterOfProfileAndDevice) {
  auto devs = Devices();
  ASSERT_FALSE(devs.empty());
  DeviceInfo dev = devs[0];
  dev.max_qp = 0;  // not reported: no limit of the device
  EXPECT_EQ(ProfileCaps(kProfileLinuxRc, dev)->max_queue_pairs, 0u);
  EXPECT_EQ(ProfileCaps(kProfileAppleTb5, dev)->max_queue_pairs, 10u);
  dev.max_qp = 1u << 16;
  EXPECT_EQ(ProfileCaps(kProfileLinuxRc, dev)->max_queue_pairs, 1u << 16);
  EXPECT_EQ(ProfileCaps(kProfileMcdmaCx5, dev)->max_queue_pairs, 1u << 16);
  EXPECT_EQ(ProfileCaps(kProfileAppleTb5, dev)->max_queue_pairs, 10u);
  dev.max_qp = 4;
  EXPECT_EQ(ProfileCaps(kProfileAppleTb5, dev)->max_queue_pairs, 4u);
  auto parsed = ParseDeviceDump("rxe1/attr/max_qp=0x10000\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->front().max_qp, 1u << 16);
}

TEST(VerbsModel, QpStateMachine) {
  EXPECT_TRUE(CheckQpTransition(QpState::kReset, QpState::kInit).ok());
  EXPECT_TRUE(CheckQpTransition(QpState::kInit, QpState::kRtr).ok());
  EXPECT_TRUE(CheckQpTransition(QpState::kRtr, QpState::kRts).ok());
  EXPECT_TRUE(CheckQpTransition(QpState::kRts, QpState::kError).ok());
  EXPECT_TRUE(CheckQpTransition(QpState::kError, QpState::kReset).ok());
  Status skip = CheckQpTransition(QpState::kInit, QpState::kRts);
  EXPECT_EQ(skip.code(), Code::kInvalid);
  EXPECT_NE(skip.message().find("INIT -> RTS"), std::string::npos);
  EXPECT_FALSE(CheckQpTransition(QpState::kReset, QpState::kRtr).ok());
  EXPECT_FALSE(CheckQpTransition(QpState::kRts, QpState::kRtr).ok());
}

}  // namespace
}  // namespace mcdma::driver::verbs
