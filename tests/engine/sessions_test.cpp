#include "engine/sessions.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace mcdma::daemon {
namespace {

shm::MailboxGeometry SmallGeometry() {
  shm::MailboxGeometry geo{};
  geo.sq_entries = 8;
  geo.cq_entries = 8;
  geo.inbox_entries = 8;
  geo.app_arena_bytes = 32 * 1024;
  geo.daemon_arena_bytes = 32 * 1024;
  return geo;
}

std::unique_ptr<Session> MakeSession(uint64_t id) {
  auto s = Session::Create(id, SmallGeometry(), getuid());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return nullptr;
  (*s)->segment().Unlink();
  return std::move(s).value();
}

TEST(SessionTable, ReapedSessionsGoButTheirCountsStay) {
  SessionTable t;
  auto a = MakeSession(3);
  auto b = MakeSession(5);
  ASSERT_TRUE(a && b);
  a->counters.ring_faults = 2;
  b->counters.ring_faults = 1;
  t.Add(std::move(a));
  t.Add(std::move(b));
  EXPECT_EQ(t.size(), 2U);
  EXPECT_EQ(t.Ids(), (std::vector<uint64_t>{3, 5}));
  ASSERT_NE(t.Find(3), nullptr);
  EXPECT_EQ(t.Find(3)->id(), 3U);
  EXPECT_EQ(t.Find(3)->header()->session_id, 3U);  // the mailbox names its session
  EXPECT_EQ(t.ring_faults(), 3U);
  t.Reap(3);
  EXPECT_EQ(t.Find(3), nullptr);
  EXPECT_EQ(t.size(), 1U);
  EXPECT_EQ(t.reaped(), 1U);
  EXPECT_EQ(t.ring_faults(), 3U);  // session 3's faults still count
  t.Reap(3);                       // gone already: nothing changes
  EXPECT_EQ(t.reaped(), 1U);
  t.Find(5)->counters.ring_faults = 4;
  EXPECT_EQ(t.ring_faults(), 6U);
}

}  // namespace
}  // namespace mcdma::daemon
