// The rails both ends of a link agree on (peer/rail_plan.hpp): what a peer
// may announce, the canonical order computed from two announcements, and
// the check of an AddRail request against it.
#include <gtest/gtest.h>

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
  RailOffer own = OwnRails(o);
  ASSERT_EQ(own.size(), 2);
  EXPECT_EQ(own[0].name(), "tcp:10.1.1.1");
  EXPECT_EQ(own[0].address(), "10.1.1.1");
  EXPECT_EQ(own[1].name(), "cable-2");
  EXPECT_TRUE(CheckRailOffer(own, "this host").ok());
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
