// The rails both ends of a link agree on (peer/rail_plan.hpp): what a peer
// may announce, the canonical order computed from two announcements, and
// the check of an AddRail request against it.
#include <gtest/gtest.h>

#include <cstdio>

#include "driver/verbs/verbs_wire.hpp"
#include "peer/rail_plan.hpp"

namespace mcdma::daemon {
namespace {

RailOffer Offer(std::initializer_list<std::pair<const char*, const char*>> rails) {
  RailOffer out;
  for (const auto& [name, address] : rails) {
    v1::PeerRail* r = out.Add();
    r->set_name(name);
    r->set_transport("tcp");
    r->set_address(address);
  }
  return out;
}

TEST(RailPlan, OwnRailsAreTheConfiguredOnesNamedByAddress) {
  Options o;
  o.rails.push_back({"", "tcp", "10.1.1.1"});
  o.rails.push_back({"cable-2", "tcp", "10.1.2.1"});
  RailOffer own = OwnRails(o, {});
  ASSERT_EQ(own.size(), 2);
  EXPECT_EQ(own[0].name(), "tcp:10.1.1.1");
  EXPECT_EQ(own[0].address(), "10.1.1.1");
  EXPECT_EQ(own[1].name(), "cable-2");
  EXPECT_TRUE(CheckRailOffer(own, "this host").ok());
}

LocalVerbsInfo Port(const std::string& device, const std::string& profile, unsigned last) {
  LocalVerbsInfo p;
  p.available = true;
  p.device = device;
  p.port = 1;
  p.rail = "verbs:" + device + ":1";
  p.profile = profile;
  char gid[40];
  std::snprintf(gid, sizeof(gid), "0000:0000:0000:0000:0000:ffff:0a00:%04x", last);
  p.gid = gid;
  return p;
}

TEST(RailPlan, OwnRailsAnnounceEveryRdmaPortFirst) {
  Options o;
  o.rails.push_back({"", "tcp", "10.1.1.1"});
  RailOffer own = OwnRails(o, {Port("ra1", "linux-rc", 1), Port("ra3", "apple-tb5", 3)});
  ASSERT_EQ(own.size(), 3);
  EXPECT_EQ(own[0].name(), "verbs:ra1:1");
  EXPECT_EQ(own[0].transport(), "verbs");
  EXPECT_EQ(own[0].device(), "ra1");
  EXPECT_EQ(own[0].port(), 1u);
  EXPECT_EQ(own[0].gid(), "0000:0000:0000:0000:0000:ffff:0a00:0001");
  EXPECT_EQ(own[1].profile(), "apple-tb5");
  EXPECT_EQ(own[2].name(), "tcp:10.1.1.1");
  EXPECT_TRUE(CheckRailOffer(own, "this host").ok()) << CheckRailOffer(own, "this host").message();
}

// Verbs rails pair only with verbs rails whose profile meets (UC with UC,
// RC with RC); unequal counts and a mix of profiles give both ends one plan.
TEST(RailPlan, VerbsRailsPairOnlyWhereProfilesMeet) {
  Options o;
  RailOffer a = OwnRails(
      o, {Port("ra1", "linux-rc", 1), Port("ra2", "mcdma-cx5", 2), Port("ra3", "apple-tb5", 3)});
  RailOffer b = OwnRails(o, {Port("rb1", "linux-rc", 11), Port("rb2", "linux-rc", 12)});
  RailOffer c = OwnRails(o, {Port("rc1", "apple-tb5", 21)});
  std::vector<RailPair> ab = PlanRails(a, b);
  ASSERT_EQ(ab.size(), 4u);  // ra1, ra2 x rb1, rb2; ra3 (UC) meets none of them
  EXPECT_EQ(ab[0].dialer.name(), "verbs:ra1:1");
  EXPECT_EQ(ab[0].callee.name(), "verbs:rb1:1");
  EXPECT_EQ(ab[3].dialer.name(), "verbs:ra2:1");
  EXPECT_EQ(ab[3].callee.name(), "verbs:rb2:1");
  std::vector<RailPair> ac = PlanRails(a, c);
  ASSERT_EQ(ac.size(), 1u);
  EXPECT_EQ(ac[0].dialer.device(), "ra3");
  EXPECT_EQ(ac[0].callee.device(), "rc1");
  EXPECT_TRUE(ProfilesMeet("linux-rc", "mcdma-cx5"));
  EXPECT_FALSE(ProfilesMeet("apple-tb5", "linux-rc"));
}

// An AddRail's verbs endpoint must be the rail its sender announced in
// Hello: a peer that lies about its GID, device or profile is refused by
// name before any queue pair points at the address it gave.
TEST(RailPlan, AVerbsEndpointThatIsNotTheAnnouncedRailIsRefused) {
  Options o;
  RailOffer b = OwnRails(o, {Port("rb1", "linux-rc", 0x0b02)});
  driver::verbs::EndpointInfo ep;
  ep.profile = "linux-rc";
  ep.device = "rb1";
  ep.gid = std::string(10, '\0') + "\xff\xff" + std::string("\x0a\x00\x0b\x02", 4);
  ep.mtu = 1024;
  ep.slot_bytes = 4096;
  ep.depth = 8;
  ep.max_outstanding = 8;
  ep.qpn = 17;
  EXPECT_TRUE(CheckVerbsEndpoint(driver::verbs::EncodeEndpoint(ep), b[0], "peer 'b'").ok())
      << CheckVerbsEndpoint(driver::verbs::EncodeEndpoint(ep), b[0], "peer 'b'").message();
  driver::verbs::EndpointInfo lie = ep;
  lie.gid[15] = '\x09';
  Status st = CheckVerbsEndpoint(driver::verbs::EncodeEndpoint(lie), b[0], "peer 'b'");
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("peer 'b''s endpoint for rail 'verbs:rb1:1' is device rb1 GID "
                              "0000:0000:0000:0000:0000:ffff:0a00:0b09, but its Hello announced "
                              "device rb1 GID 0000:0000:0000:0000:0000:ffff:0a00:0b02"),
            std::string::npos)
      << st.message();
  lie = ep;
  lie.device = "rb2";
  EXPECT_EQ(CheckVerbsEndpoint(driver::verbs::EncodeEndpoint(lie), b[0], "p").code(),
            Code::kInvalid);
  lie = ep;
  lie.profile = "apple-tb5";
  lie.unreliable = true;
  st = CheckVerbsEndpoint(driver::verbs::EncodeEndpoint(lie), b[0], "p");
  EXPECT_NE(st.message().find("runs profile apple-tb5"), std::string::npos) << st.message();
  EXPECT_EQ(CheckVerbsEndpoint("garbage", b[0], "p").code(), Code::kInvalid);
}

TEST(RailPlan, BothEndsComputeOneOrderWhateverTheirListsOrder) {
  RailOffer a = Offer({{"tcp:10.1.2.1", "10.1.2.1"}, {"tcp:10.1.1.1", "10.1.1.1"}});
  RailOffer b = Offer({{"tcp:10.1.1.2", "10.1.1.2"}, {"tcp:10.1.2.2", "10.1.2.2"}});
  RailOffer b_reordered = Offer({{"tcp:10.1.2.2", "10.1.2.2"}, {"tcp:10.1.1.2", "10.1.1.2"}});
  std::vector<RailPair> plan = PlanRails(a, b);
  std::vector<RailPair> again = PlanRails(a, b_reordered);
  ASSERT_EQ(plan.size(), 4u);
  ASSERT_EQ(again.size(), 4u);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].index, i + 1);
    EXPECT_EQ(plan[i].dialer.name(), again[i].dialer.name());
    EXPECT_EQ(plan[i].callee.name(), again[i].callee.name());
  }
  EXPECT_EQ(plan[0].dialer.name(), "tcp:10.1.1.1");
  EXPECT_EQ(plan[0].callee.name(), "tcp:10.1.1.2");
  EXPECT_EQ(plan[3].dialer.name(), "tcp:10.1.2.1");
  EXPECT_EQ(plan[3].callee.name(), "tcp:10.1.2.2");
  // Unequal counts: every pair still has one index.
  RailOffer one = Offer({{"tcp:10.1.1.2", "10.1.1.2"}});
  std::vector<RailPair> small = PlanRails(a, one);
  ASSERT_EQ(small.size(), 2u);
  EXPECT_EQ(small[1].dialer.name(), "tcp:10.1.2.1");
  EXPECT_TRUE(PlanRails(a, {}).empty());
}

TEST(RailPlan, AnAddRailMustNameThePairAtItsIndex) {
  RailOffer a = Offer({{"tcp:10.1.1.1", "10.1.1.1"}, {"tcp:10.1.2.1", "10.1.2.1"}});
  RailOffer b = Offer({{"tcp:10.1.1.2", "10.1.1.2"}, {"tcp:10.1.2.2", "10.1.2.2"}});
  std::vector<RailPair> plan = PlanRails(a, b);
  auto ok = FindRailPair(plan, 4, "tcp:10.1.2.1", "tcp:10.1.2.2");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->callee.address(), "10.1.2.2");
  // Reordered: the right pair under another index.
  auto reordered = FindRailPair(plan, 1, "tcp:10.1.2.1", "tcp:10.1.2.2");
  EXPECT_EQ(reordered.status().code(), Code::kInvalid);
  EXPECT_NE(reordered.status().message().find("canonical order"), std::string::npos)
      << reordered.status().message();
  // A rail nobody announced, an index out of the plan, index 0.
  EXPECT_EQ(FindRailPair(plan, 2, "tcp:10.9.9.9", "tcp:10.1.2.2").status().code(), Code::kInvalid);
  auto far = FindRailPair(plan, 5, "tcp:10.1.2.1", "tcp:10.1.2.2");
  EXPECT_EQ(far.status().code(), Code::kInvalid);
  EXPECT_NE(far.status().message().find("not in the plan"), std::string::npos);
  EXPECT_EQ(FindRailPair(plan, 0, "", "").status().code(), Code::kInvalid);
}

TEST(RailPlan, AHostileAnnouncementIsRefusedByName) {
  auto why = [](const RailOffer& o) { return CheckRailOffer(o, "peer 'b'").message(); };
  EXPECT_NE(why(Offer({{"", "10.1.1.1"}})).find("peer 'b' rail[0]: a name"), std::string::npos);
  EXPECT_NE(why(Offer({{"x", "10.1.1.1"}, {"x", "10.1.2.1"}})).find("announced twice"),
            std::string::npos);
  EXPECT_NE(why(Offer({{"x", "not-an-ip"}})).find("not an IP address"), std::string::npos);
  RailOffer verbs = Offer({{"x", "10.1.1.1"}});
  verbs[0].set_transport("carrier-pigeon");
  EXPECT_NE(why(verbs).find("not a rail transport"), std::string::npos);
  // Verbs rails: a device, a port, a known profile and a GID; no device twice.
  auto verbs_rail = [](const std::string& name, const std::string& device, uint32_t port,
                       const std::string& profile, const std::string& gid) {
    RailOffer o;
    v1::PeerRail* r = o.Add();
    r->set_name(name);
    r->set_transport("verbs");
    r->set_device(device);
    r->set_port(port);
    r->set_profile(profile);
    r->set_gid(gid);
    return o;
  };
  const std::string gid = "fe80:0000:0000:0000:0000:0000:0000:0001";
  EXPECT_TRUE(CheckRailOffer(verbs_rail("v", "rxe1", 1, "linux-rc", gid), "p").ok());
  EXPECT_NE(why(verbs_rail("v", "", 1, "linux-rc", gid)).find("names its device"),
            std::string::npos);
  EXPECT_NE(why(verbs_rail("v", "rxe1", 0, "linux-rc", gid)).find("not in 1..255"),
            std::string::npos);
  EXPECT_NE(why(verbs_rail("v", "rxe1", 1, "warp-drive", gid)).find("profile 'warp-drive'"),
            std::string::npos);
  EXPECT_NE(why(verbs_rail("v", "rxe1", 1, "linux-rc", "10.1.1.1")).find("is not a GID"),
            std::string::npos);
  RailOffer twice = verbs_rail("v1", "rxe1", 1, "linux-rc", gid);
  twice.Add()->CopyFrom(verbs_rail("v2", "rxe1", 2, "linux-rc", gid)[0]);
  EXPECT_NE(why(twice).find("device 'rxe1' is announced twice"), std::string::npos);
  RailOffer many;
  for (int i = 0; i <= kMaxRailsOffered; ++i) {
    v1::PeerRail* r = many.Add();
    r->set_name("r" + std::to_string(i));
    r->set_transport("tcp");
    r->set_address("10.0.0." + std::to_string(i + 1));
  }
  EXPECT_NE(why(many).find("at most"), std::string::npos);
  // Many rails on both ends: the plan is bounded.
  RailOffer other = many;
  EXPECT_LE(PlanRails(many, other).size(), kMaxRailPairs);
}

}  // namespace
}  // namespace mcdma::daemon
