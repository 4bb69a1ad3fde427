// The budgets resolved at start-up (budgets.hpp), the per-user table
// (engine/user_table.hpp), TTL saturation, name reservations and the peer
// authentication gate's address parsing: plain functions, no daemon.
#include "engine/user_table.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "budgets.hpp"
#include "config/options.hpp"
#include "engine/resources.hpp"
#include "peer/auth_gate.hpp"

namespace mcdma::daemon {
namespace {

TEST(Budgets, AutoCapsFitTheOpenFileLimit) {
  Options o;
  ASSERT_TRUE(ResolveBudgets(o, MachineFacts{256, uint64_t{64} << 20}).ok());
  EXPECT_EQ(o.max_open_files, 256u);
  uint64_t room = 256 - kFilesReserved;
  EXPECT_EQ(o.max_connections, room / 2);
  EXPECT_EQ(o.peer_max_connections, room / 4);
  EXPECT_LE(uint64_t{o.max_connections} + o.peer_max_connections, room);
  EXPECT_EQ(o.max_connections_per_user, o.max_connections / 4);
  EXPECT_EQ(o.per_user_bytes, (uint64_t{64} << 20) / 4 * 3);
}

TEST(Budgets, ConfiguredCapsThatDoNotFitAreRefusedWithTheNumbers) {
  Options o;
  o.max_connections = 200;
  o.peer_max_connections = 100;
  Status st = ResolveBudgets(o, MachineFacts{256, 0});
  ASSERT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("limits.max_connections (200)"), std::string::npos) << st.ToString();
  Options above;
  above.max_open_files = 4096;
  st = ResolveBudgets(above, MachineFacts{1024, 0});
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_NE(st.message().find("limits.max_open_files"), std::string::npos) << st.ToString();
  Options tiny;
  st = ResolveBudgets(tiny, MachineFacts{40, 0});
  EXPECT_EQ(st.code(), Code::kInvalid) << "40 files leave nothing for connections";
}

TEST(UserTable, ChargesUpToEachBudgetAndRefusesWithUserQuota) {
  UserTable users(UserBudget{2, 3, 1000});
  ASSERT_TRUE(users.ChargeSession(7, 100).ok());
  ASSERT_TRUE(users.ChargeSession(7, 100).ok());
  Status third = users.ChargeSession(7, 100);
  EXPECT_EQ(third.code(), Code::kBusy);
  EXPECT_EQ(third.reason(), Reason::kUserQuota);
  EXPECT_TRUE(users.ChargeSession(8, 100).ok()) << "another user has its own budget";
  Status bytes = users.ChargeBuffer(7, 801);
  EXPECT_EQ(bytes.code(), Code::kNoMemory);
  EXPECT_EQ(bytes.reason(), Reason::kUserQuota);
  ASSERT_TRUE(users.ChargeBuffer(7, 800).ok());
  EXPECT_EQ(users.users().at(7).bytes, 1000u);
  users.RefundBuffer(7, 800);
  users.RefundSession(7, 100);
  users.RefundSession(7, 100);
  EXPECT_EQ(users.users().count(7), 0u) << "a user with nothing left is forgotten";
  EXPECT_EQ(users.ChargeBuffer(9, uint64_t{1} << 63).reason(), Reason::kUserQuota);
}

TEST(ExpiryAfter, ATtlPastTheClocksRangeIsNever) {
  auto now = Clock::now();
  EXPECT_EQ(ExpiryAfter(1000, now), now + std::chrono::milliseconds(1000));
  EXPECT_FALSE(ExpiryAfter(std::numeric_limits<uint64_t>::max(), now).has_value());
  EXPECT_FALSE(ExpiryAfter(uint64_t{9'300'000'000'000'000}, now).has_value());
  // Whatever is representable is honoured, not clamped.
  auto far = ExpiryAfter(uint64_t{86'400'000} * 365, now);
  ASSERT_TRUE(far.has_value());
  EXPECT_GT(*far, now);
}

TEST(NameReservations, TheLongestPrefixDecides) {
  std::vector<NameReservation> r = {{"kv.", 1000}, {"kv.shared.", 1001}};
  EXPECT_EQ(ReservedFor(r, "kv.req"), 1000u);
  EXPECT_EQ(ReservedFor(r, "kv.shared.x"), 1001u);
  EXPECT_FALSE(ReservedFor(r, "other").has_value());
  auto parsed = ParseReservation("mcdma.kv.=1000");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->prefix, "mcdma.kv.");
  EXPECT_EQ(parsed->uid, 1000u);
  EXPECT_EQ(ParseReservation("kv.").status().code(), Code::kInvalid);
  EXPECT_EQ(ParseReservation("kv.=abc").status().code(), Code::kInvalid);
  EXPECT_EQ(ParseReservation("=5").status().code(), Code::kInvalid);
}

TEST(AuthGate, CountsPeersByAddressWithoutThePort) {
  EXPECT_EQ(AuthGate::AddressOf("ipv4:10.0.0.2:5123"), "10.0.0.2");
  EXPECT_EQ(AuthGate::AddressOf("ipv6:[::1]:5123"), "::1");
  EXPECT_EQ(AuthGate::AddressOf("ipv6:[fe80::1%eth0]:7"), "fe80::1%eth0");
  EXPECT_EQ(AuthGate::AddressOf("unix:/x"), "unix");
}

}  // namespace
}  // namespace mcdma::daemon
