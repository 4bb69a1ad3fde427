#include "engine/call_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "fake_clock.hpp"

namespace mcdma::daemon {
namespace {
using std::chrono::milliseconds;
using testing::FakeClock;

PendingCall LocalCall(uint64_t caller, uint64_t tag, uint64_t server, Clock::time_point deadline) {
  return PendingCall{SessionCaller{caller, tag}, SessionServer{server, 7}, deadline};
}

TEST(CallTable, TakeReturnsTheBookedCallOnce) {
  FakeClock clock;
  CallTable t;
  t.Add(10, LocalCall(1, 99, 2, clock.now() + milliseconds(5)));
  ASSERT_NE(t.Find(10), nullptr);
  EXPECT_TRUE(t.Find(10)->served_by_session(2));
  EXPECT_TRUE(t.Find(10)->called_by_session(1));
  EXPECT_EQ(t.Find(10)->link(), 0U);
  auto call = t.Take(10);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(std::get<SessionCaller>(call->caller).tag, 99U);
  EXPECT_FALSE(t.Take(10).has_value());
  EXPECT_TRUE(t.empty());
}

TEST(CallTable, DeadlinesExpireInOrderOnlyOnceTheClockPassesThem) {
  FakeClock clock;
  CallTable t;
  t.Add(1, LocalCall(1, 1, 2, clock.now() + milliseconds(30)));
  t.Add(2, LocalCall(1, 2, 2, clock.now() + milliseconds(10)));
  t.Add(3, LocalCall(1, 3, 2, clock.now() + milliseconds(20)));
  EXPECT_EQ(*t.NextDeadline(), clock.now() + milliseconds(10));
  EXPECT_TRUE(t.TakeExpired(clock.now()).empty());
  clock.Advance(milliseconds(20));
  auto expired = t.TakeExpired(clock.now());
  ASSERT_EQ(expired.size(), 2U);
  EXPECT_EQ(expired[0].first, 2U);
  EXPECT_EQ(expired[1].first, 3U);
  EXPECT_EQ(t.size(), 1U);
  EXPECT_NE(t.Find(1), nullptr);
}

TEST(CallTable, AnsweredCallsDoNotExpireButMayLeaveAnEarlyDeadline) {
  FakeClock clock;
  CallTable t;
  t.Add(1, LocalCall(1, 1, 2, clock.now() + milliseconds(10)));
  t.Add(2, LocalCall(1, 2, 2, clock.now() + milliseconds(50)));
  ASSERT_TRUE(t.Take(1).has_value());
  // Early, never late: the sleeping engine wakes, finds nothing, sleeps on.
  EXPECT_EQ(*t.NextDeadline(), clock.now() + milliseconds(10));
  clock.Advance(milliseconds(10));
  EXPECT_TRUE(t.TakeExpired(clock.now()).empty());
  EXPECT_EQ(*t.NextDeadline(), clock.now() + milliseconds(40));
  clock.Advance(milliseconds(40));
  auto expired = t.TakeExpired(clock.now());
  ASSERT_EQ(expired.size(), 1U);
  EXPECT_EQ(expired[0].first, 2U);
  EXPECT_FALSE(t.NextDeadline().has_value());
}

TEST(CallTable, LinkCallsAreFoundByTheirLinkOnEitherSide) {
  FakeClock clock;
  CallTable t;
  auto deadline = clock.now() + milliseconds(5);
  // A peer's call on link 4, served by session 2.
  t.Add(1, PendingCall{LinkCaller{4, 555}, SessionServer{2, 7}, deadline});
  // Session 1's notify to a peer's service over link 4.
  t.Add(2, PendingCall{SessionCaller{1, 9}, LinkServer{4, 8, true, 123}, deadline});
  // Session 1's call over link 5.
  t.Add(3, PendingCall{SessionCaller{1, 10}, LinkServer{5, 8, false, 0}, deadline});
  t.Add(4, LocalCall(1, 11, 2, deadline));
  auto on4 = t.OnLink(4);
  std::sort(on4.begin(), on4.end());
  EXPECT_EQ(on4, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(t.CountOnLink(4), 2U);
  EXPECT_EQ(t.CountOnLink(5), 1U);
  EXPECT_EQ(t.CountOnLink(6), 0U);
  EXPECT_TRUE(t.Find(2)->one_way());
  EXPECT_FALSE(t.Find(3)->one_way());
  EXPECT_TRUE(t.Find(2)->served_on_link(4));
  EXPECT_FALSE(t.Find(1)->served_on_link(4));  // its caller is on the link, not its server
}

TEST(CallTable, ASessionsEndDropsItsCallsAndListsTheOnesItServes) {
  FakeClock clock;
  CallTable t;
  auto deadline = clock.now() + milliseconds(5);
  t.Add(1, LocalCall(/*caller=*/1, 1, /*server=*/2, deadline));
  t.Add(2, LocalCall(/*caller=*/2, 2, /*server=*/3, deadline));
  t.Add(3, PendingCall{LinkCaller{4, 77}, SessionServer{2, 7}, deadline});
  auto served = t.ServedBy(2);
  std::sort(served.begin(), served.end());
  EXPECT_EQ(served, (std::vector<uint64_t>{1, 3}));
  t.DropCalledBy(2);
  EXPECT_EQ(t.Find(2), nullptr);
  EXPECT_NE(t.Find(1), nullptr);
  EXPECT_NE(t.Find(3), nullptr);
  EXPECT_EQ(t.size(), 2U);
}

}  // namespace
}  // namespace mcdma::daemon
