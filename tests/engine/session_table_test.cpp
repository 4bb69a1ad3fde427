#include "engine/session_table.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

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
  EXPECT_TRUE((*s)->segment().Unlink().ok());
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

namespace mcdma::daemon {
namespace {

TEST(SessionBacklog, IsBoundedInEventsBytesAndTheDaemonWideRoom) {
  std::unique_ptr<Session> s = MakeSession(1);
  ASSERT_NE(s, nullptr);
  shm::EventDesc ev{};
  ev.kind = static_cast<uint8_t>(shm::EventKind::kIncomingNotify);
  std::vector<std::byte> payload(16 * 1024, std::byte{1});
  BacklogLimit limit{100, 40 * 1024, 1 << 20};
  // The daemon half (32 KiB) takes two; the inbox nobody reads keeps them.
  ASSERT_TRUE(s->Post(true, ev, payload, limit));
  ASSERT_TRUE(s->Post(true, ev, payload, limit));
  EXPECT_EQ(s->backlog(), 0u);
  // Then the backlog: two more fit its 40 KiB, the third would pass it.
  ASSERT_TRUE(s->Post(true, ev, payload, limit));
  ASSERT_TRUE(s->Post(true, ev, payload, limit));
  EXPECT_EQ(s->backlog_bytes(), 32u * 1024);
  EXPECT_FALSE(s->Post(true, ev, payload, limit))
      << "16 MiB notifications grew the daemon unbounded";
  EXPECT_EQ(s->backlog(), 2u);
  // The daemon-wide room binds too, whatever the session's own budget.
  BacklogLimit no_room{100, 1 << 20, 8 * 1024};
  EXPECT_FALSE(s->Post(true, ev, payload, no_room));
  // Events without payload count against the event limit only.
  BacklogLimit two_events{2, 1 << 20, 1 << 20};
  EXPECT_FALSE(s->Post(true, ev, {}, two_events));
}

}  // namespace
}  // namespace mcdma::daemon
